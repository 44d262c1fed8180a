/** Where an adapter came from: the browser's navigator.gpu, or Dawn in Node on a Vulkan driver. */
export type AdapterSource = 'browser' | 'system' | 'lavapipe' | 'swiftshader';

/** What the engine needs to know about the adapter it got, and what doctor and the UI show. */
export interface AdapterReport {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** The adapter says it is a fallback (software or otherwise reduced). */
  isFallback: boolean;
  /** A CPU implementation of WebGPU (SwiftShader, lavapipe): expect 0.2–2 GFLOP/s. */
  isSoftware: boolean;
  source: AdapterSource;
  /** The limits that size our buffers and workgroups (the device is requested with these maxima). */
  limits: {
    maxBufferSize: number;
    maxStorageBufferBindingSize: number;
    maxStorageBuffersPerShaderStage: number;
    maxComputeWorkgroupSizeX: number;
    maxComputeInvocationsPerWorkgroup: number;
    maxComputeWorkgroupStorageSize: number;
    maxComputeWorkgroupsPerDimension: number;
  };
  features: {
    shaderF16: boolean;
    subgroups: boolean;
    timestampQuery: boolean;
  };
}

export interface GpuContext {
  adapter: GPUAdapter;
  device: GPUDevice;
  report: AdapterReport;
  /** Destroys the device; safe to call twice. */
  destroy(): void;
}

export interface AcquireOptions {
  /**
   * Which adapter to take. `auto` (default): a real GPU if there is one, else lavapipe, else
   * SwiftShader. In Node the SHOAL_ADAPTER environment variable sets the default.
   */
  prefer?: 'auto' | 'system' | 'lavapipe' | 'swiftshader';
  powerPreference?: GPUPowerPreference;
  /**
   * Ask for `chromium-experimental-subgroup-matrix` (tensor cores) where the adapter offers it;
   * in Node this also turns on Dawn's `allow_unsafe_apis`, without which Dawn hides the feature.
   * Default in Node: SHOAL_PRECISION=f16 (the only path that uses it); off elsewhere.
   */
  subgroupMatrix?: boolean;
}

/** No WebGPU adapter could be had. The message says what was tried and what to install. */
export class NoAdapterError extends Error {
  override name = 'NoAdapterError';
  constructor(
    message: string,
    /** One line per attempt: what was tried and why it gave nothing. */
    readonly attempts: string[] = [],
  ) {
    super(attempts.length > 0 ? `${message}\n${attempts.map((a) => `  - ${a}`).join('\n')}` : message);
  }
}
