import { describe, expect, it } from 'vitest';
import { type PeerDownReason, TransportEmitter, TransportError } from './transport.ts';

describe('TransportEmitter', () => {
  it('calls listeners in order with the event arguments, until removed', () => {
    const emitter = new TransportEmitter();
    const calls: string[] = [];
    const offA = emitter.on('message', (from, bytes) => calls.push(`a:${from}:${bytes.length}`));
    emitter.on('message', (from) => calls.push(`b:${from}`));
    emitter.on('peer-down', (peer, reason: PeerDownReason) => calls.push(`down:${peer}:${reason.code}`));
    emitter.emit('message', 'p1', new Uint8Array(3));
    offA();
    offA(); // removing twice is harmless
    emitter.emit('message', 'p2', new Uint8Array(0));
    emitter.emit('peer-down', 'p1', { code: 'timeout', message: 'no heartbeat for 10 s' });
    expect(calls).toEqual(['a:p1:3', 'b:p1', 'b:p2', 'down:p1:timeout']);
  });

  it('registers one function twice as two listeners, removed one at a time', () => {
    const emitter = new TransportEmitter();
    let count = 0;
    const listener = () => count++;
    const off = emitter.on('peer-up', listener);
    emitter.on('peer-up', listener);
    emitter.emit('peer-up', 'p');
    off();
    emitter.emit('peer-up', 'p');
    expect(count).toBe(3);
    expect(emitter.listenerCount('peer-up')).toBe(1);
  });

  it('runs the others when a listener throws, and reports the error', () => {
    const errors: unknown[] = [];
    const emitter = new TransportEmitter((error) => errors.push(error));
    const calls: string[] = [];
    emitter.on('peer-up', () => {
      throw new Error('boom');
    });
    emitter.on('peer-up', (peer) => calls.push(peer));
    emitter.emit('peer-up', 'p9');
    expect(calls).toEqual(['p9']);
    expect(String(errors[0])).toMatch(/boom/);
  });

  it('snapshots listeners during an event, and clear() drops them all', () => {
    const emitter = new TransportEmitter();
    const calls: string[] = [];
    emitter.on('peer-up', () => {
      calls.push('first');
      emitter.on('peer-up', () => calls.push('added'));
    });
    emitter.emit('peer-up', 'p');
    expect(calls).toEqual(['first']);
    emitter.clear();
    emitter.emit('peer-up', 'p');
    expect(calls).toEqual(['first']);
    expect(new TransportError('peer-not-up', 'p is down')).toMatchObject({
      code: 'peer-not-up',
      name: 'TransportError',
    });
  });
});
