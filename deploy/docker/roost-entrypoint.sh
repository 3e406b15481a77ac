#!/bin/sh
# Image entrypoint: `roost [all|api|gateway|worker|migrate] [args...]`.
#   no argument      -> the role ROOST_ROLE names (default "all")
#   a role           -> that role (overrides ROOST_ROLE)
#   migrate          -> apply pending migrations to DATABASE_URL (or the embedded database), exit
#   anything else    -> run it as a command (e.g. `sh`, `node -e ...`) for debugging
set -eu
app="${ROOST_APP_DIR:-/app}"
case "${1:-}" in
  "")
    exec node "$app/dist/apps/roost/src/main.js"
    ;;
  all|api|gateway|worker)
    ROOST_ROLE="$1"
    export ROOST_ROLE
    shift
    exec node "$app/dist/apps/roost/src/main.js" "$@"
    ;;
  migrate)
    shift
    exec node "$app/dist/apps/roost/src/migrate.js" "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
