set -e
git init -q -b main .
git config user.email tests@deepgym.invalid && git config user.name tests
printf '#!/bin/sh\necho "hello, $1"\n' > greet.sh && git add greet.sh && git commit -qm "greet"
printf '#!/bin/sh\necho "goodbye"\n' > greet.sh && git commit -qam "refactor greeting"
printf 'a small repository\n' > README && git add README && git commit -qm "readme"
