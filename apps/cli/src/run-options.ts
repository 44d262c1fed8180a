/**
 * The run options' table (@shoal/swarm/run-options) as commander options: `shoal host` offers
 * every one, `shoal simulate` those that apply to it, and other commands borrow single ones.
 */
import {
  parseRunOption,
  RUN_OPTION_NAMES,
  RUN_OPTIONS,
  type RunOptionName,
  type RunOptions,
} from '@shoal/swarm/run-options';
import { type Command, InvalidArgumentError, Option } from 'commander';

/** The option `name` as commander's: flag, help (with the choices), default and a checking parser. */
export function runOption(name: RunOptionName, help?: string): Option {
  const spec = RUN_OPTIONS[name];
  const choices = spec.kind === 'choice' ? `: ${spec.choices.join(' | ')}` : '';
  return new Option(`${spec.flag} <${spec.metavar}>`, `${help ?? spec.help}${choices}`)
    .default(spec.default)
    .argParser((raw: string) => {
      const { value, error } = parseRunOption(name, raw);
      if (error !== undefined) throw new InvalidArgumentError(error);
      return value;
    });
}

/** Adds the run options a command offers, in the table's order. */
export function withRunOptions(command: Command, which: 'host' | 'simulate'): Command {
  for (const name of RUN_OPTION_NAMES) {
    if (which === 'host' || RUN_OPTIONS[name].simulate) command.addOption(runOption(name));
  }
  return command;
}

/** The run options out of a command's parsed options (commander has checked each). */
export function runOptionsFrom(options: Record<string, unknown>): RunOptions {
  return Object.fromEntries(RUN_OPTION_NAMES.map((name) => [name, options[name]])) as unknown as RunOptions;
}
