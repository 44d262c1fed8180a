/** The virtual clock's queue: a binary min-heap of events by (time, scheduling order). */

export interface ClockEvent {
  at: number;
  /** Scheduling order, the tie-breaker. */
  seq: number;
  /** null once it has run or was cancelled (such events are skipped, not removed). */
  callback: (() => void) | null;
}

export class EventHeap {
  private readonly items: ClockEvent[] = [];

  peek(): ClockEvent | undefined {
    return this.items[0];
  }

  push(event: ClockEvent): void {
    const items = this.items;
    items.push(event);
    let at = items.length - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (!before(event, items[parent] as ClockEvent)) break;
      items[at] = items[parent] as ClockEvent;
      at = parent;
    }
    items[at] = event;
  }

  pop(): ClockEvent | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child =
        right < items.length && before(items[right] as ClockEvent, items[left] as ClockEvent) ? right : left;
      if (!before(items[child] as ClockEvent, last)) break;
      items[at] = items[child] as ClockEvent;
      at = child;
    }
    items[at] = last;
    return top;
  }
}

function before(a: ClockEvent, b: ClockEvent): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
