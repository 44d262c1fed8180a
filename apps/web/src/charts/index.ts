// The dashboard's charts: uPlot in React, and the pure RoomViewPoint → columns helpers.
export * from './format.ts';
export { RoomCharts, type RoomChartsProps } from './RoomCharts.tsx';
export * from './series.ts';
export { TimeSeriesChart, type TimeSeriesChartProps } from './TimeSeriesChart.tsx';
