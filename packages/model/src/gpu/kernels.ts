import {
  AttentionKernels,
  CrossEntropyKernels,
  EmbeddingKernels,
  GeluKernels,
  LayernormKernels,
  MatmulKernels,
  ResidualKernels,
  VectorKernels,
} from '@shoal/gpu';

/** The kernel families a model binds, compiled once per device and head size; shareable between models. */
export interface GptKernels {
  readonly headSize: number;
  matmul: MatmulKernels;
  layernorm: LayernormKernels;
  attention: AttentionKernels;
  gelu: GeluKernels;
  residual: ResidualKernels;
  embedding: EmbeddingKernels;
  crossEntropy: CrossEntropyKernels;
  vector: VectorKernels;
}

export async function createGptKernels(device: GPUDevice, headSize: number): Promise<GptKernels> {
  const [matmul, layernorm, attention, gelu, residual, embedding, crossEntropy, vector] = await Promise.all([
    MatmulKernels.create(device),
    LayernormKernels.create(device),
    AttentionKernels.create(device, headSize),
    GeluKernels.create(device),
    ResidualKernels.create(device),
    EmbeddingKernels.create(device),
    CrossEntropyKernels.create(device),
    VectorKernels.create(device),
  ]);
  return { headSize, matmul, layernorm, attention, gelu, residual, embedding, crossEntropy, vector };
}
