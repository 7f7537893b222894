import type { MethodName } from "../src/generated/types.js";

/** Session methods a phone may call; everything else (daemon.* admin
 * included) is refused. */
export const RELAYED_METHODS: ReadonlySet<string> = new Set<MethodName>([
  "agentSession.create", "agentSession.list", "agentSession.get", "agentSession.hold",
  "agentSession.release", "agentSession.close", "agentSession.read", "agentSession.send",
  "agentSession.cancel", "agentSession.respond", "agentSession.attach", "agentSession.detach",
]);
