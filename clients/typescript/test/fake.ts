// A peer on a Unix socket that speaks just enough of the protocol to play
// a daemon misbehaving in ways the real one does not (garbage, dropped
// connections, a stream lagged again and again).
import { createServer, type Server, type Socket } from "node:net";

export function frame(m: object): string {
  const b = JSON.stringify(m);
  return `Content-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
}

/** A peer that speaks just enough of the protocol: requests to answer(). */
export function fakePeer(path: string, answer: (s: Socket, conn: number, m: { id: number; method: string }) => void): Promise<Server> {
  let conns = 0;
  const srv = createServer((s) => {
    const conn = ++conns;
    let buf = Buffer.alloc(0);
    s.on("error", () => undefined);
    s.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const len = Number(/Content-Length: (\d+)/i.exec(buf.subarray(0, end).toString())?.[1]);
        if (buf.length < end + 4 + len) return;
        const m = JSON.parse(buf.subarray(end + 4, end + 4 + len).toString()) as { id: number; method: string };
        buf = buf.subarray(end + 4 + len);
        answer(s, conn, m);
      }
    });
  });
  return new Promise((res) => srv.listen(path, () => res(srv)));
}

export const INIT = { protocolVersion: 1, server: { name: "fake", version: "0" }, capabilities: [], connectionId: "c-1" };
