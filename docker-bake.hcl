# Build every deepgym image:            docker buildx bake
# Build one environment (and its base):  docker buildx bake coin_change
# Offline hosts: build the Debian base first (images/bootstrap-debian.sh) and pass it:
#   DEBIAN_IMAGE=deepgym/debian-bootstrap:bookworm docker buildx bake
# `deepgym images build` does all of this, builds only what is missing or stale, and sets CONTENT_HASHES.

variable "DEBIAN_IMAGE" {
  default = "debian:bookworm-slim"
}

# Prefix for every image name, e.g. "ghcr.io/acme/" (keep the trailing slash). Empty: local names.
variable "REGISTRY" {
  default = ""
}

variable "TAG" {
  default = "latest"
}

# JSON object {environment: content hash}, set by `deepgym images build`. Images built without it carry
# the hash "unknown", which deepgym reports as "cannot tell whether this image is current".
variable "CONTENT_HASHES" {
  default = "{}"
}

function "image" {
  params = [name]
  result = "${REGISTRY}deepgym-${name}:${TAG}"
}

function "environment_labels" {
  params = [name]
  result = {
    "org.deepgym.environment"  = name
    "org.deepgym.content-hash" = lookup(jsondecode(CONTENT_HASHES), name, "unknown")
  }
}

group "default" {
  targets = ["base", "environments"]
}

group "environments" {
  targets = ["coin_change"]
}

target "base" {
  context    = "images/base"
  contexts   = { runner = "deepgym/runner" }
  args       = { DEBIAN_IMAGE = DEBIAN_IMAGE }
  tags       = [image("base")]
  labels     = { "org.deepgym.content-hash" = lookup(jsondecode(CONTENT_HASHES), "base", "unknown") }
}

# Every environment image starts from the base target through the named context "base".
target "_environment" {
  contexts = { base = "target:base" }
}

target "coin_change" {
  inherits = ["_environment"]
  context  = "environments/coin_change"
  tags     = [image("coin_change")]
  labels   = environment_labels("coin_change")
}
