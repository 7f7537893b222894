import type { Event, Subscription } from "../src/index.js";

/** Reads sub until turn.completed of turnId (or any turn when absent). */
export async function untilTurnCompleted(sub: Subscription, turnId?: string, seen: Event[] = []): Promise<Event[]> {
  for (;;) {
    const r = await sub.next();
    if (r.done) throw new Error(`stream ended before turn.completed; saw ${seen.map((e) => e.type).join(",")}`);
    seen.push(r.value);
    if (r.value.type === "turn.completed" && (!turnId || r.value.turnId === turnId)) return seen;
  }
}

/** Reads sub until an event matches. */
export async function until(sub: Subscription, pred: (e: Event) => boolean, seen: Event[] = []): Promise<Event> {
  for (;;) {
    const r = await sub.next();
    if (r.done) throw new Error(`stream ended; saw ${seen.map((e) => e.type).join(",")}`);
    seen.push(r.value);
    if (pred(r.value)) return r.value;
  }
}

/** The assistant's text of a turn's events. */
export function deltaText(events: Event[], turnId: string): string {
  return events.filter((e) => e.type === "message.delta" && e.turnId === turnId)
    .map((e) => (e.data as { text: string }).text).join("");
}

/** Asserts the seqs are strictly increasing by one (no gap, no duplicate). */
export function gapless(events: Event[]): string | undefined {
  for (let i = 1; i < events.length; i++) {
    if (events[i]!.seq !== events[i - 1]!.seq + 1) return `seq ${events[i - 1]!.seq} then ${events[i]!.seq}`;
  }
  return undefined;
}
