// Prefixes every line a worker prints with its rank, like torchrun's --tee ("[rank0]:..."). Lines
// end at '\n' only; a partial line is held until its newline (or the end of the stream), so lines
// of different ranks never mix.
import { StringDecoder } from 'string_decoder';
import type { Readable, Writable } from 'stream';

export function prefixLines(from: Readable, to: Writable, prefix: string): Promise<void> {
  const decoder = new StringDecoder('utf8');
  let partial = '';
  const emit = (text: string) => {
    const lines = (partial + text).split('\n');
    partial = lines.pop()!;
    if (lines.length) to.write(lines.map((l) => `${prefix}${l}\n`).join(''));
  };
  from.on('data', (chunk: Buffer) => emit(decoder.write(chunk)));
  return new Promise((resolve) => {
    const finish = () => {
      emit(decoder.end());
      if (partial) to.write(`${prefix}${partial}\n`);
      partial = '';
      resolve();
    };
    from.once('end', finish);
    from.once('error', finish);
    from.once('close', finish);
  });
}
