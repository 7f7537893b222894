#!/bin/sh
# A fake ACP agent that closes its stdout at a phase and runs on: $1 is
# the phase (initialize: as initialize arrives; session/new: as
# session/new arrives; answered: right after answering session/new), $2
# a file it writes its pid to. The daemon's requests are numbered from 1.
echo $$ > "$2"
read -r _ # initialize
[ "$1" = initialize ] && exec sleep 100000 >&-
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}'
read -r _ # session/new
[ "$1" = session/new ] && exec sleep 100000 >&-
printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s-1"}}'
exec sleep 100000 >&-
