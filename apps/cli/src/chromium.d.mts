export declare const CHROMIUM_CANDIDATES: string[];
export declare function chromiumPath(): string | null;
export declare const CHROMIUM_WEBGPU_ARGS: string[];
