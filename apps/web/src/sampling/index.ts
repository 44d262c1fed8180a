// The sampling panel and its light helpers. Not the engine: sample-engine.ts (onnxruntime-web,
// the exporter) loads only inside the sampling worker, or through import() as a fallback.
export { SamplePanel, type SamplePanelProps, type SampleParams } from './SamplePanel.tsx';
export { SampleClient } from './sample-client.ts';
export * from './settings.ts';
