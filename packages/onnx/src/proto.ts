/**
 * The part of onnx.proto (github.com/onnx/onnx, onnx/onnx.proto, proto2) that an exported GPT
 * uses, as a protobufjs JSON descriptor: message and field names, numbers, types and packing
 * exactly as there (names camelCased, as protobufjs's own .proto parser gives them). Fields we
 * never write are left out; a reader skips nothing it needs, since unknown fields are not sent.
 *
 * protobufjs/light (reflection without the .proto parser, ~90 kB minified) does the wire format;
 * the exporter is meant to be loaded lazily in the browser, so this stays off the first load.
 */
import protobuf from 'protobufjs/light.js';

/** TensorProto.DataType values we use. */
export const DataType = { FLOAT: 1, INT64: 7 } as const;
export type DataTypeValue = (typeof DataType)[keyof typeof DataType];

/** AttributeProto.AttributeType values we use. */
export const AttributeType = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, INTS: 7 } as const;

/** proto2 repeated scalars are unpacked unless onnx.proto says `[packed = true]`. */
const unpacked = { packed: false };

const ONNX_DESCRIPTOR = {
  nested: {
    onnx: {
      nested: {
        AttributeProto: {
          fields: {
            name: { type: 'string', id: 1 },
            refAttrName: { type: 'string', id: 21 },
            docString: { type: 'string', id: 13 },
            type: { type: 'int32', id: 20 }, // AttributeType enum, written as its number
            f: { type: 'float', id: 2 },
            i: { type: 'int64', id: 3 },
            s: { type: 'bytes', id: 4 },
            t: { type: 'TensorProto', id: 5 },
            g: { type: 'GraphProto', id: 6 },
            floats: { rule: 'repeated', type: 'float', id: 7, options: unpacked },
            ints: { rule: 'repeated', type: 'int64', id: 8, options: unpacked },
            strings: { rule: 'repeated', type: 'bytes', id: 9 },
          },
        },
        ValueInfoProto: {
          fields: {
            name: { type: 'string', id: 1 },
            type: { type: 'TypeProto', id: 2 },
            docString: { type: 'string', id: 3 },
          },
        },
        NodeProto: {
          fields: {
            input: { rule: 'repeated', type: 'string', id: 1 },
            output: { rule: 'repeated', type: 'string', id: 2 },
            name: { type: 'string', id: 3 },
            opType: { type: 'string', id: 4 },
            domain: { type: 'string', id: 7 },
            attribute: { rule: 'repeated', type: 'AttributeProto', id: 5 },
            docString: { type: 'string', id: 6 },
          },
        },
        ModelProto: {
          fields: {
            irVersion: { type: 'int64', id: 1 },
            opsetImport: { rule: 'repeated', type: 'OperatorSetIdProto', id: 8 },
            producerName: { type: 'string', id: 2 },
            producerVersion: { type: 'string', id: 3 },
            domain: { type: 'string', id: 4 },
            modelVersion: { type: 'int64', id: 5 },
            docString: { type: 'string', id: 6 },
            graph: { type: 'GraphProto', id: 7 },
            metadataProps: { rule: 'repeated', type: 'StringStringEntryProto', id: 14 },
          },
        },
        StringStringEntryProto: {
          fields: {
            key: { type: 'string', id: 1 },
            value: { type: 'string', id: 2 },
          },
        },
        GraphProto: {
          fields: {
            node: { rule: 'repeated', type: 'NodeProto', id: 1 },
            name: { type: 'string', id: 2 },
            initializer: { rule: 'repeated', type: 'TensorProto', id: 5 },
            docString: { type: 'string', id: 10 },
            input: { rule: 'repeated', type: 'ValueInfoProto', id: 11 },
            output: { rule: 'repeated', type: 'ValueInfoProto', id: 12 },
            valueInfo: { rule: 'repeated', type: 'ValueInfoProto', id: 13 },
          },
        },
        TensorProto: {
          fields: {
            dims: { rule: 'repeated', type: 'int64', id: 1, options: unpacked },
            dataType: { type: 'int32', id: 2 }, // DataType enum, written as its number
            floatData: { rule: 'repeated', type: 'float', id: 4, options: { packed: true } },
            int64Data: { rule: 'repeated', type: 'int64', id: 7, options: { packed: true } },
            name: { type: 'string', id: 8 },
            docString: { type: 'string', id: 12 },
            rawData: { type: 'bytes', id: 9 },
          },
        },
        TensorShapeProto: {
          fields: {
            dim: { rule: 'repeated', type: 'Dimension', id: 1 },
          },
          nested: {
            Dimension: {
              oneofs: { value: { oneof: ['dimValue', 'dimParam'] } },
              fields: {
                dimValue: { type: 'int64', id: 1 },
                dimParam: { type: 'string', id: 2 },
                denotation: { type: 'string', id: 3 },
              },
            },
          },
        },
        TypeProto: {
          oneofs: { value: { oneof: ['tensorType'] } },
          fields: {
            tensorType: { type: 'Tensor', id: 1 },
            denotation: { type: 'string', id: 6 },
          },
          nested: {
            Tensor: {
              fields: {
                elemType: { type: 'int32', id: 1 },
                shape: { type: 'TensorShapeProto', id: 2 },
              },
            },
          },
        },
        OperatorSetIdProto: {
          fields: {
            domain: { type: 'string', id: 1 },
            version: { type: 'int64', id: 2 },
          },
        },
      },
    },
  },
};

// Plain-object shapes of the messages above, as the exporter fills them in.

export interface TensorMessage {
  name: string;
  dims: number[];
  dataType: DataTypeValue;
  /** Fixed-width little-endian values, row-major. */
  rawData: Uint8Array;
  docString?: string;
}

export interface AttributeMessage {
  name: string;
  type: (typeof AttributeType)[keyof typeof AttributeType];
  f?: number;
  i?: number;
  s?: Uint8Array;
  t?: TensorMessage;
  ints?: number[];
}

export interface NodeMessage {
  input: string[];
  output: string[];
  name: string;
  opType: string;
  attribute: AttributeMessage[];
}

/** A dimension is a size, or a name for a size fixed only at run time. */
export type Dimension = number | string;

export interface ValueInfoMessage {
  name: string;
  type: { tensorType: { elemType: DataTypeValue; shape: { dim: ({ dimValue: number } | { dimParam: string })[] } } };
  docString?: string;
}

export interface GraphMessage {
  name: string;
  node: NodeMessage[];
  initializer: TensorMessage[];
  input: ValueInfoMessage[];
  output: ValueInfoMessage[];
  docString?: string;
}

export interface ModelMessage {
  irVersion: number;
  opsetImport: { domain: string; version: number }[];
  producerName: string;
  producerVersion: string;
  docString?: string;
  graph: GraphMessage;
  metadataProps: { key: string; value: string }[];
}

let modelType: protobuf.Type | null = null;

/** The protobufjs type of ModelProto, built once from the descriptor. */
export function modelProtoType(): protobuf.Type {
  modelType ??= protobuf.Root.fromJSON(ONNX_DESCRIPTOR).lookupType('onnx.ModelProto');
  return modelType;
}

/** Serialises a model: the bytes of an .onnx file. */
export function encodeModel(model: ModelMessage): Uint8Array {
  const type = modelProtoType();
  const error = type.verify(model);
  if (error) throw new Error(`ONNX model does not fit onnx.ModelProto: ${error}`);
  return type.encode(model).finish();
}

/** The metadata_props of an .onnx file, as a record (only ModelProto's top level is read). */
export function readModelMetadata(bytes: Uint8Array): Record<string, string> {
  let decoded: protobuf.Message;
  try {
    decoded = modelProtoType().decode(bytes);
  } catch (error) {
    throw new Error(`not an ONNX model: ${(error as Error).message}`);
  }
  const { metadataProps = [] } = decoded as unknown as { metadataProps?: { key: string; value: string }[] };
  return Object.fromEntries(metadataProps.map(({ key, value }) => [key, value]));
}
