/**
 * The progress bar's ETA for one method of `shoal simulate`: the wall time per simulated token
 * measured since the method's first progress report, times the tokens left, read when the bar is
 * drawn. cli-progress's own ETA is the rate over its last ten updates, and a room's updates come in
 * bursts: inner steps cost little (nothing in a dry run) and a round then holds the virtual clock
 * for seconds, so it promised "4s" at a sixth of a run that had a minute to go. The first report
 * comes after the room is built (init, joins), which is not a per-token cost.
 */
export class TokenEta {
  private first: { atMs: number; tokens: number } | null = null;

  /** `tokens` simulated so far (a progress report) at wall time `atMs`. */
  note(tokens: number, atMs: number): void {
    if (this.first === null && tokens > 0) this.first = { atMs, tokens };
  }

  /**
   * Seconds left at wall time `nowMs` with `tokens` of `total` done; null before a report past
   * the first. The wall time since the last report counts: a round that holds up the tokens makes
   * the estimate grow until they move again.
   */
  secondsLeft(nowMs: number, tokens: number, total: number): number | null {
    const first = this.first;
    if (first === null || tokens <= first.tokens) return null;
    const msPerToken = (nowMs - first.atMs) / (tokens - first.tokens);
    return (Math.max(0, total - tokens) * msPerToken) / 1000;
  }
}
