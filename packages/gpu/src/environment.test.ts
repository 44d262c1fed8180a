import { afterEach, describe, expect, it } from 'vitest';
import { choiceFromEnvironment } from './environment.ts';

describe('choiceFromEnvironment', () => {
  afterEach(() => {
    delete process.env.SHOAL_TEST_CHOICE;
  });

  it('reads a listed value, treats unset and empty as unset, and refuses others naming the choices', () => {
    const choices = ['register', 'tiled', 'rows'] as const;
    expect(choiceFromEnvironment('SHOAL_TEST_CHOICE', choices)).toBeUndefined();
    process.env.SHOAL_TEST_CHOICE = '';
    expect(choiceFromEnvironment('SHOAL_TEST_CHOICE', choices)).toBeUndefined();
    process.env.SHOAL_TEST_CHOICE = 'tiled';
    expect(choiceFromEnvironment('SHOAL_TEST_CHOICE', choices)).toBe('tiled');
    process.env.SHOAL_TEST_CHOICE = 'fast';
    expect(() => choiceFromEnvironment('SHOAL_TEST_CHOICE', choices)).toThrow(
      'SHOAL_TEST_CHOICE=fast: use register, tiled or rows',
    );
    expect(() => choiceFromEnvironment('SHOAL_TEST_CHOICE', ['f32', 'f16'])).toThrow('use f32 or f16');
  });
});
