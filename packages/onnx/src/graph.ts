/**
 * A small builder for ONNX graphs: named values, nodes in topological order (the order they are
 * added), initializers, and typed attributes. It knows nothing about GPT; export.ts uses it.
 */
import {
  type AttributeMessage,
  AttributeType,
  DataType,
  type DataTypeValue,
  type Dimension,
  type GraphMessage,
  type NodeMessage,
  type TensorMessage,
  type ValueInfoMessage,
} from './proto.ts';

/** An attribute value with its ONNX type spelled out (1 and 1.0 are different attributes). */
export type Attribute =
  | { int: number }
  | { float: number }
  | { ints: number[] }
  | { string: string }
  | { tensor: TensorMessage };

export const int = (value: number): Attribute => ({ int: value });
export const float = (value: number): Attribute => ({ float: value });
export const ints = (values: number[]): Attribute => ({ ints: values });

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** The bytes of a typed array as ONNX raw_data (fixed width, little-endian). */
function rawBytes(values: Float32Array | BigInt64Array): Uint8Array {
  // Every browser and Node platform JS runs on today is little-endian; refuse rather than guess.
  if (!LITTLE_ENDIAN) throw new Error('ONNX export needs a little-endian platform');
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

export function floatTensor(name: string, dims: number[], values: Float32Array, docString?: string): TensorMessage {
  const count = dims.reduce((a, b) => a * b, 1);
  if (count !== values.length)
    throw new RangeError(`${name}: dims [${dims}] hold ${count} values, got ${values.length}`);
  return { name, dims, dataType: DataType.FLOAT, rawData: rawBytes(values), ...(docString ? { docString } : {}) };
}

function int64Tensor(name: string, dims: number[], values: number[]): TensorMessage {
  return { name, dims, dataType: DataType.INT64, rawData: rawBytes(BigInt64Array.from(values, BigInt)) };
}

function attribute(name: string, value: Attribute): AttributeMessage {
  if ('int' in value) return { name, type: AttributeType.INT, i: value.int };
  if ('float' in value) return { name, type: AttributeType.FLOAT, f: value.float };
  if ('ints' in value) return { name, type: AttributeType.INTS, ints: value.ints };
  if ('string' in value) return { name, type: AttributeType.STRING, s: new TextEncoder().encode(value.string) };
  return { name, type: AttributeType.TENSOR, t: value.tensor };
}

function valueInfo(name: string, elemType: DataTypeValue, dims: Dimension[], docString?: string): ValueInfoMessage {
  const dim = dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d }));
  return { name, type: { tensorType: { elemType, shape: { dim } } }, ...(docString ? { docString } : {}) };
}

export class GraphBuilder {
  private readonly nodes: NodeMessage[] = [];
  private readonly initializers: TensorMessage[] = [];
  private readonly inputs: ValueInfoMessage[] = [];
  private readonly outputs: ValueInfoMessage[] = [];
  private readonly names = new Set<string>();
  private readonly counts = new Map<string, number>();
  /** Constants by value, so each distinct one is stored once. */
  private readonly constants = new Map<string, string>();

  constructor(private readonly name: string) {}

  /** A name not taken yet: `prefix`, else `prefix_N`. */
  private unused(prefix: string): string {
    if (!this.names.has(prefix)) return prefix;
    let n = this.counts.get(prefix) ?? 1;
    while (this.names.has(`${prefix}_${n}`)) n++;
    this.counts.set(prefix, n + 1);
    return `${prefix}_${n}`;
  }

  private fresh(prefix: string): string {
    return this.claim(this.unused(prefix));
  }

  private claim(name: string): string {
    if (this.names.has(name)) throw new Error(`ONNX graph: the name ${name} is taken`);
    this.names.add(name);
    return name;
  }

  input(name: string, elemType: DataTypeValue, dims: Dimension[], docString?: string): string {
    this.inputs.push(valueInfo(this.claim(name), elemType, dims, docString));
    return name;
  }

  /** Declares an existing value as a graph output. */
  output(name: string, elemType: DataTypeValue, dims: Dimension[], docString?: string): void {
    if (!this.names.has(name)) throw new Error(`ONNX graph: no value named ${name} to output`);
    this.outputs.push(valueInfo(name, elemType, dims, docString));
  }

  initializer(tensor: TensorMessage): string {
    this.claim(tensor.name);
    this.initializers.push(tensor);
    return tensor.name;
  }

  /** An int64 constant (shapes, axes, indices); `dims` [] makes a scalar. Named on first use. */
  int64(name: string, values: number[], dims: number[] = [values.length]): string {
    return this.constant(`int64 [${dims}] ${values}`, () => int64Tensor(this.unused(name), dims, values));
  }

  /** A float32 scalar constant. Named on first use. */
  scalar(name: string, value: number): string {
    return this.constant(`float ${value}`, () => floatTensor(this.unused(name), [], Float32Array.of(value)));
  }

  private constant(key: string, make: () => TensorMessage): string {
    const known = this.constants.get(key);
    if (known) return known;
    const name = this.initializer(make());
    this.constants.set(key, name);
    return name;
  }

  /**
   * Adds a node; returns its output names, `outputs` of them (named after the node, or as given
   * when `outputs` is a list of names).
   */
  nodeN(
    opType: string,
    inputs: string[],
    attrs: Record<string, Attribute>,
    name: string,
    outputs: number | string[],
  ): string[] {
    for (const input of inputs) {
      if (input !== '' && !this.names.has(input))
        throw new Error(`ONNX graph: ${opType} ${name} reads unknown ${input}`);
    }
    const nodeName = this.fresh(name);
    const outputNames =
      typeof outputs === 'number'
        ? Array.from({ length: outputs }, (_, i) => (outputs === 1 ? nodeName : this.fresh(`${nodeName}:${i}`)))
        : outputs.map((output) => this.claim(output));
    this.nodes.push({
      input: inputs,
      output: outputNames,
      name: nodeName,
      opType,
      attribute: Object.entries(attrs).map(([key, value]) => attribute(key, value)),
    });
    return outputNames;
  }

  /** Adds a node with one output, named after the node unless `output` names it. */
  node(
    opType: string,
    inputs: string[],
    attrs: Record<string, Attribute> = {},
    name = opType,
    output?: string,
  ): string {
    return this.nodeN(opType, inputs, attrs, name, output === undefined ? 1 : [output])[0] as string;
  }

  build(docString?: string): GraphMessage {
    return {
      name: this.name,
      node: this.nodes,
      initializer: this.initializers,
      input: this.inputs,
      output: this.outputs,
      ...(docString ? { docString } : {}),
    };
  }
}
