#!/bin/sh
# A hostile ACP agent: it answers its one prompt with a 1 MB stopReason,
# then asks a permission with no turn running, and waits. The daemon's
# requests are numbered from 1 (initialize, session/new, session/prompt).
read -r _ # initialize
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}'
read -r _ # session/new
printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s-1"}}'
read -r _ # session/prompt
printf '{"jsonrpc":"2.0","id":3,"result":{"stopReason":"%s"}}\n' "$(head -c 1000000 /dev/zero | tr '\0' x)"
printf '%s\n' '{"jsonrpc":"2.0","id":"late","method":"session/request_permission","params":{"sessionId":"s-1","toolCall":{"toolCallId":"c1","title":"rm","kind":"delete"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}'
while read -r _; do :; done
