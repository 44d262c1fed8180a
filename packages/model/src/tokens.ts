/**
 * Throws a RangeError on the first token outside [0, V): every backend indexes its embedding
 * table with the tokens unchecked (the CPU and GPU kernels, TF.js's gather). `what` names the
 * array in the message ("inputs: token 256 at position 4 is outside [0, 256)").
 */
export function checkTokens(tokens: ArrayLike<number>, V: number, what?: string): void {
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as number;
    if (!(Number.isInteger(token) && token >= 0 && token < V)) {
      throw new RangeError(`${what ? `${what}: ` : ''}token ${token} at position ${i} is outside [0, ${V})`);
    }
  }
}
