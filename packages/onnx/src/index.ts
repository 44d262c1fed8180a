// Also two separate entries, so a page can lazy-load one without the other:
// '@shoal/onnx/export' (the exporter and protobufjs/light: 120 kB minified with @shoal/model) and
// '@shoal/onnx/runner' (onnxruntime-web, whose .wasm is 14–28 MB).
export * from './export.ts';
export * from './runner.ts';
