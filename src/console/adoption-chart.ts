// The adoption funnel's chart on the console's report page: drawn here as SVG (no script, no
// chart library: a few lines and axes), labelled for assistive technology by its title and a
// description of today's figures, each line told apart by its dash pattern and marker as well as
// its colour, with the same figures in a table beside it.
import { html, type Html } from '../ui/html.ts';
import { ADOPTION_STAGES, type AdoptionDay } from '../store/adoption.ts';

const W = 720;
const H = 280;
const PAD = { left: 56, right: 16, top: 16, bottom: 40 };
const DAY = 86_400_000;

export type Stage = (typeof ADOPTION_STAGES)[number];

/** The y axis's top: a little above max, 1, 2, 4 or 8 times a power of ten, so its quarters are round. */
function niceMax(max: number): number {
  const target = Math.max(4, max * 1.05);
  const p = 10 ** Math.floor(Math.log10(target));
  for (const m of [1, 2, 4, 8]) if (m * p >= target) return m * p;
  return 10 * p;
}

const fixed = (n: number) => (Math.round(n * 10) / 10).toString();

/**
 * The chart of `days` (oldest first, the last one today) over the `span` days ending today;
 * labels: each stage's name, title: the chart's name, describe: the text of its description.
 */
export function adoptionChart(
  days: AdoptionDay[],
  span: number,
  labels: Record<Stage, string>,
  text: { title: string; describe: string },
): Html {
  const last = days.at(-1);
  if (!last) return html``;
  const end = Date.parse(`${last.day}T00:00:00Z`);
  const start = end - (span - 1) * DAY;
  const top = niceMax(Math.max(1, ...days.map((d) => d.users)));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const x = (day: string) => PAD.left + ((Date.parse(`${day}T00:00:00Z`) - start) / ((span - 1) * DAY || 1)) * plotW;
  const y = (n: number) => PAD.top + plotH - (n / top) * plotH;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => Math.round(top * f));
  const grid = ticks.map(
    (t) =>
      html`<line class="chart-grid" x1="${String(PAD.left)}" x2="${String(W - PAD.right)}" y1="${fixed(y(t))}" y2="${fixed(y(t))}"/><text class="chart-axis" x="${String(PAD.left - 6)}" y="${fixed(y(t) + 4)}" text-anchor="end">${String(t)}</text>`,
  );
  const firstDay = new Date(start).toISOString().slice(0, 10);
  const xLabels = html`<text class="chart-axis" x="${String(PAD.left)}" y="${String(H - PAD.bottom + 18)}" text-anchor="start">${firstDay}</text><text class="chart-axis" x="${String(W - PAD.right)}" y="${String(H - PAD.bottom + 18)}" text-anchor="end">${last.day}</text>`;
  const series = ADOPTION_STAGES.map((stage, i) => {
    const points = days.map((d) => `${fixed(x(d.day))},${fixed(y(d[stage]))}`).join(' ');
    const lx = x(last.day);
    const ly = y(last[stage]);
    return html`<g class="chart-series chart-series-${String(i + 1)}"><polyline points="${points}" fill="none"/><circle cx="${fixed(lx)}" cy="${fixed(ly)}" r="4"/></g>`;
  });
  const legend = ADOPTION_STAGES.map(
    (stage, i) =>
      html`<li><svg width="28" height="10" aria-hidden="true" focusable="false"><g class="chart-series chart-series-${String(i + 1)}"><line x1="0" x2="28" y1="5" y2="5"/></g></svg> ${labels[stage]}</li>`,
  );
  return html`<figure class="chart">
<svg viewBox="0 0 ${String(W)} ${String(H)}" role="img" aria-labelledby="adoption-chart-title adoption-chart-desc" focusable="false">
<title id="adoption-chart-title">${text.title}</title>
<desc id="adoption-chart-desc">${text.describe}</desc>
${grid}${xLabels}
<line class="chart-axis-line" x1="${String(PAD.left)}" x2="${String(PAD.left)}" y1="${String(PAD.top)}" y2="${String(PAD.top + plotH)}"/>
<line class="chart-axis-line" x1="${String(PAD.left)}" x2="${String(W - PAD.right)}" y1="${String(PAD.top + plotH)}" y2="${String(PAD.top + plotH)}"/>
${series}
</svg>
<figcaption><ul class="chart-legend">${legend}</ul></figcaption>
</figure>`;
}
