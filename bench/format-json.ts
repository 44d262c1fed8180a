/** Indented JSON as the project's formatter (Biome) leaves it: short arrays of numbers on one line, 3 decimals. */
export function formatJson(value: unknown): string {
  const text = JSON.stringify(value, (_key, v) => (typeof v === 'number' ? Math.round(v * 1000) / 1000 : v), 2);
  const collapsed = text.replace(/^( *)("[^"]*": )?\[\n([^[\]{}]*?)\n *\]/gm, (whole, indent, key, items) => {
    const list = (items as string)
      .trim()
      .split(/,\n\s*/)
      .join(', ');
    const line = `${indent}${key ?? ''}[${list}]`;
    return line.length <= 120 ? line : whole;
  });
  return `${collapsed}\n`;
}
