// The local path's framing (ServiceGroupLocalToAgent / ServiceGroupLocalToMember in @cmesh/protocol): one JSON
// object per line on a Unix socket. Frames are small (the data is in shared memory), so a line
// longer than MAX_FRAME_BYTES, or one that is not JSON, closes the socket.
import type { Socket } from 'net';

/** The longest frame line either side reads (an op header with its fields is a few hundred bytes). */
export const MAX_FRAME_BYTES = 64 * 1024;

/** Calls `onFrame` with each line's parsed object; a line that is not JSON, or too long, closes the socket. */
export function readFrames(sock: Socket, onFrame: (frame: unknown) => void, maxBytes = MAX_FRAME_BYTES): void {
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('data', (chunk: string) => {
    buf += chunk;
    for (let i = buf.indexOf('\n'); i >= 0 && !sock.destroyed; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.length > maxBytes) return void sock.destroy(new Error(`a frame of ${line.length} characters (at most ${maxBytes})`));
      let frame: unknown;
      try {
        frame = JSON.parse(line);
      } catch {
        sock.destroy(new Error(`not a JSON frame: ${JSON.stringify(line.slice(0, 80))}`));
        return;
      }
      try {
        onFrame(frame);
      } catch (e) {
        // a handler's bug closes this socket only, never the process
        return void sock.destroy(e instanceof Error ? e : new Error(String(e)));
      }
    }
    if (buf.length > maxBytes) sock.destroy(new Error(`a frame of more than ${maxBytes} characters`));
  });
}

export function writeFrame(sock: Socket, frame: object): void {
  if (!sock.destroyed) sock.write(JSON.stringify(frame) + '\n');
}
