// The local path's framing (SvcLocalToAgent / SvcLocalToMember in @cmesh/protocol): one JSON
// object per line on a Unix socket. Frames are small (the data is in shared memory).
import type { Socket } from 'net';

/** Calls `onFrame` with each line's parsed object; a line that is not JSON closes the socket. */
export function readFrames(sock: Socket, onFrame: (frame: unknown) => void): void {
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('data', (chunk: string) => {
    buf += chunk;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let frame: unknown;
      try {
        frame = JSON.parse(line);
      } catch {
        sock.destroy(new Error(`not a JSON frame: ${line.slice(0, 80)}`));
        return;
      }
      onFrame(frame);
    }
  });
}

export function writeFrame(sock: Socket, frame: object): void {
  if (!sock.destroyed) sock.write(JSON.stringify(frame) + '\n');
}
