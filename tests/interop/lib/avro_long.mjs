// avsc's long type reading and writing BigInt, so that values beyond 2^53 (snapshot ids,
// INT64_MIN/MAX) decode without loss. Shared by the interop scripts.
import avro from 'avsc';

export const bigLong = avro.types.LongType.__with({
  fromBuffer: (buf) => buf.readBigInt64LE(),
  toBuffer: (n) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(BigInt(n));
    return buf;
  },
  fromJSON: (v) => BigInt(v),
  toJSON: (n) => Number(n),
  isValid: (n) => typeof n === 'bigint',
  compare: (a, b) => (a < b ? -1 : a > b ? 1 : 0),
});
