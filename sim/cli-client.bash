# The thin client behind sim/bin/talosctl (sourced; $tool names the CLI). With a
# simulator running, its env file sets SIM_CLI_SERVER and the simulator runs the command
# (sim/cli-server.js, which documents the protocol): this relays the output and the exit code, so a
# call costs a bash start, near what the real Go binary costs, rather than a node start. Without
# one, node runs the same code as a process: sim/$tool/cli.js.
own_process() { exec node "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/$tool/cli.js" "$@"; }
[[ -n ${SIM_CLI_SERVER:-} ]] && { exec 3<>"/dev/tcp/${SIM_CLI_SERVER%:*}/${SIM_CLI_SERVER##*:}"; } 2>/dev/null || own_process "$@"
{
  printf '%s\0%s\0%s\0' "$tool" "$PWD" "$#"
  (($#)) && printf '%s\0' "$@"
  env -0
  printf '\0'
} >&3
LC_ALL=C # frame sizes are bytes
# talosctl: the first signal makes the simulator cancel the calls in flight (talosctl prints why
# and fails them as a cancelled context); a second ends it here
signalled=
on_signal() { [[ -n $signalled ]] && exit 1; signalled=1; printf c >&3; }
trap on_signal INT TERM
# a chunk of exactly $1 bytes into $chunk, across interruptions by a signal
read_chunk() {
  local part status
  chunk=
  while ((${#chunk} < $1)); do
    IFS= read -r -d '' -N $(($1 - ${#chunk})) -u 3 part
    status=$?
    chunk+=$part
    ((status == 0 || status > 128)) || exit 1
  done
}
while :; do
  IFS=' ' read -r -u 3 channel size
  status=$?
  ((status > 128)) && continue # interrupted by a signal: go on reading
  ((status == 0)) || exit 1     # the simulator went away
  case $channel in
    out) read_chunk "$size"; printf '%s' "$chunk" ;;
    err) read_chunk "$size"; printf '%s' "$chunk" >&2 ;;
    exit) exit "$size" ;;
    *) exit 1 ;;
  esac
done
