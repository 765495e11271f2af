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
  targets = ["base", "environments", "runtimes"]
}

# Desktop environments (computer use): their apps on top of the desktop image. Part of "environments".
group "desktops" {
  targets = ["expense_sheet", "settings_tabs", "signup_form", "todo_list"]
}

# Generic images per language runtime: they judge tests that travel with a dataset's rows (deepgym/rows.py).
group "runtimes" {
  targets = ["row_python"]
}

group "environments" {
  targets = [
    "coin_change",
    "count_islands",
    "edit_distance",
    "expense_sheet",
    "interval_scheduling",
    "knapsack_01",
    "longest_increasing_subsequence",
    "lru_cache_ops",
    "merge_intervals",
    "patch_config_merge",
    "patch_csv_quoting",
    "patch_rate_limiter",
    "patch_semver_compare",
    "prog_anagram_groups",
    "prog_circle_area",
    "prog_max_subarray",
    "prog_range_sum_queries",
    "prog_shortest_grid_path",
    "shell_find_largest",
    "shell_fix_config",
    "shell_organise_files",
    "settings_tabs",
    "shell_repair_script",
    "shortest_path",
    "signup_form",
    "todo_list",
    "topological_sort",
    "two_sum",
    "valid_sudoku",
    "word_break",
  ]
}

target "base" {
  context    = "images/base"
  contexts   = { runner = "deepgym/runner" }
  args       = { DEBIAN_IMAGE = DEBIAN_IMAGE }
  tags       = [image("base")]
  labels     = { "org.deepgym.base.content-hash" = lookup(jsondecode(CONTENT_HASHES), "base", "unknown") }
}

# A registry for the tests of `deepgym images push` (tests/registry/docker-compose.yml), on top of the base.
# Not in group "default": `deepgym images build` builds it when the tests ask for it.
target "registry" {
  contexts = { base = "target:base" }
  context  = "images/registry"
  tags     = [image("registry")]
  labels   = { "org.deepgym.content-hash" = lookup(jsondecode(CONTENT_HASHES), "registry", "unknown") }
}

# The base of desktop environments: Xvfb, chromium under policy, the action daemon and the state recorder
# (images/desktop). Built when a desktop environment is.
target "desktop" {
  contexts = { base = "target:base" }
  context  = "images/desktop"
  tags     = [image("desktop")]
}

# Every desktop environment starts from the desktop target through the named context "desktop".
target "_desktop" {
  contexts = { desktop = "target:desktop" }
}

# Every environment image starts from the base target through the named context "base".
target "_environment" {
  contexts = { base = "target:base" }
}

target "row_python" {
  inherits = ["_environment"]
  context  = "images/row_python"
  tags     = [image("row_python")]
  labels   = environment_labels("row_python")
}

target "coin_change" {
  inherits = ["_environment"]
  context  = "environments/coin_change"
  tags     = [image("coin_change")]
  labels   = environment_labels("coin_change")
}

target "count_islands" {
  inherits = ["_environment"]
  context  = "environments/count_islands"
  tags     = [image("count_islands")]
  labels   = environment_labels("count_islands")
}

target "edit_distance" {
  inherits = ["_environment"]
  context  = "environments/edit_distance"
  tags     = [image("edit_distance")]
  labels   = environment_labels("edit_distance")
}

target "interval_scheduling" {
  inherits = ["_environment"]
  context  = "environments/interval_scheduling"
  tags     = [image("interval_scheduling")]
  labels   = environment_labels("interval_scheduling")
}

target "knapsack_01" {
  inherits = ["_environment"]
  context  = "environments/knapsack_01"
  tags     = [image("knapsack_01")]
  labels   = environment_labels("knapsack_01")
}

target "longest_increasing_subsequence" {
  inherits = ["_environment"]
  context  = "environments/longest_increasing_subsequence"
  tags     = [image("longest_increasing_subsequence")]
  labels   = environment_labels("longest_increasing_subsequence")
}

target "lru_cache_ops" {
  inherits = ["_environment"]
  context  = "environments/lru_cache_ops"
  tags     = [image("lru_cache_ops")]
  labels   = environment_labels("lru_cache_ops")
}

target "merge_intervals" {
  inherits = ["_environment"]
  context  = "environments/merge_intervals"
  tags     = [image("merge_intervals")]
  labels   = environment_labels("merge_intervals")
}

target "patch_config_merge" {
  inherits = ["_environment"]
  context  = "environments/patch_config_merge"
  tags     = [image("patch_config_merge")]
  labels   = environment_labels("patch_config_merge")
}

target "patch_csv_quoting" {
  inherits = ["_environment"]
  context  = "environments/patch_csv_quoting"
  tags     = [image("patch_csv_quoting")]
  labels   = environment_labels("patch_csv_quoting")
}

target "patch_rate_limiter" {
  inherits = ["_environment"]
  context  = "environments/patch_rate_limiter"
  tags     = [image("patch_rate_limiter")]
  labels   = environment_labels("patch_rate_limiter")
}

target "patch_semver_compare" {
  inherits = ["_environment"]
  context  = "environments/patch_semver_compare"
  tags     = [image("patch_semver_compare")]
  labels   = environment_labels("patch_semver_compare")
}

target "prog_anagram_groups" {
  inherits = ["_environment"]
  context  = "environments/prog_anagram_groups"
  tags     = [image("prog_anagram_groups")]
  labels   = environment_labels("prog_anagram_groups")
}

target "prog_circle_area" {
  inherits = ["_environment"]
  context  = "environments/prog_circle_area"
  tags     = [image("prog_circle_area")]
  labels   = environment_labels("prog_circle_area")
}

target "prog_max_subarray" {
  inherits = ["_environment"]
  context  = "environments/prog_max_subarray"
  tags     = [image("prog_max_subarray")]
  labels   = environment_labels("prog_max_subarray")
}

target "prog_range_sum_queries" {
  inherits = ["_environment"]
  context  = "environments/prog_range_sum_queries"
  tags     = [image("prog_range_sum_queries")]
  labels   = environment_labels("prog_range_sum_queries")
}

target "prog_shortest_grid_path" {
  inherits = ["_environment"]
  context  = "environments/prog_shortest_grid_path"
  tags     = [image("prog_shortest_grid_path")]
  labels   = environment_labels("prog_shortest_grid_path")
}

target "shell_find_largest" {
  inherits = ["_environment"]
  context  = "environments/shell_find_largest"
  tags     = [image("shell_find_largest")]
  labels   = environment_labels("shell_find_largest")
}

target "shell_fix_config" {
  inherits = ["_environment"]
  context  = "environments/shell_fix_config"
  tags     = [image("shell_fix_config")]
  labels   = environment_labels("shell_fix_config")
}

target "shell_organise_files" {
  inherits = ["_environment"]
  context  = "environments/shell_organise_files"
  tags     = [image("shell_organise_files")]
  labels   = environment_labels("shell_organise_files")
}

target "shell_repair_script" {
  inherits = ["_environment"]
  context  = "environments/shell_repair_script"
  tags     = [image("shell_repair_script")]
  labels   = environment_labels("shell_repair_script")
}

target "shortest_path" {
  inherits = ["_environment"]
  context  = "environments/shortest_path"
  tags     = [image("shortest_path")]
  labels   = environment_labels("shortest_path")
}

target "topological_sort" {
  inherits = ["_environment"]
  context  = "environments/topological_sort"
  tags     = [image("topological_sort")]
  labels   = environment_labels("topological_sort")
}

target "two_sum" {
  inherits = ["_environment"]
  context  = "environments/two_sum"
  tags     = [image("two_sum")]
  labels   = environment_labels("two_sum")
}

target "valid_sudoku" {
  inherits = ["_environment"]
  context  = "environments/valid_sudoku"
  tags     = [image("valid_sudoku")]
  labels   = environment_labels("valid_sudoku")
}

target "word_break" {
  inherits = ["_environment"]
  context  = "environments/word_break"
  tags     = [image("word_break")]
  labels   = environment_labels("word_break")
}

target "signup_form" {
  inherits = ["_desktop"]
  context  = "environments/signup_form"
  tags     = [image("signup_form")]
  labels   = environment_labels("signup_form")
}

target "todo_list" {
  inherits = ["_desktop"]
  context  = "environments/todo_list"
  tags     = [image("todo_list")]
  labels   = environment_labels("todo_list")
}

target "settings_tabs" {
  inherits = ["_desktop"]
  context  = "environments/settings_tabs"
  tags     = [image("settings_tabs")]
  labels   = environment_labels("settings_tabs")
}

target "expense_sheet" {
  inherits = ["_desktop"]
  context  = "environments/expense_sheet"
  tags     = [image("expense_sheet")]
  labels   = environment_labels("expense_sheet")
}
