/**
 * The message union: every kind that travels between the members of a room, who sends it to
 * whom and when, and the schema its JSON part is validated against.
 *
 * A message is `{ kind, …header fields, …body, payload? }`. Which header fields a kind uses
 * (fragment, round, shard, codec, weight) is fixed per kind in MESSAGE_SPECS; they travel in the
 * binary header only (wire.ts), never also in the JSON, so the two cannot disagree. The body is
 * the JSON part. `payload` is the binary part of contribution, shard-result and state-transfer.
 *
 * | kind           | sender → receiver                 | when                                         |
 * | -------------- | --------------------------------- | -------------------------------------------- |
 * | hello          | member → coordinator              | first message on connecting                  |
 * | welcome        | coordinator → member              | hello accepted                               |
 * | roster         | coordinator → every member        | membership or member status changed          |
 * | heartbeat      | member → coordinator              | every `heartbeatMs`                          |
 * | round-open     | coordinator → every replica       | the median worker reached the round's step   |
 * | contribution   | participant → owner and checker   | at its next inner-step boundary after open   |
 * | shard-result   | shard owner/checker → replicas    | all expected contributions in, or deadline   |
 * | hash-report    | replica → coordinator             | tentative outer step done                    |
 * | commit         | coordinator → every replica       | a quorum of participants reported one hash   |
 * | abort          | coordinator → every replica       | deadline or quorum missed                    |
 * | reassign       | coordinator → every replica       | a shard owner went down mid-round            |
 * | state-request  | joiner or diverged → state holder | after welcome, or after a commit it missed   |
 * | state-transfer | state holder → requester          | answer to a state-request                    |
 * | rejected       | anyone → sender of a bad message  | a message was refused for a reason           |
 * | leave          | member → every peer               | leaving on purpose                           |
 * | corpus-request | member → coordinator              | the room's text is not on this machine       |
 * | corpus-transfer| coordinator → requester           | answer to a corpus-request                   |
 * | pipe           | stage worker → its group's stages | every micro-batch and step of a pipeline     |
 * | dataset-request| member → coordinator              | a dataset file its URL did not give          |
 * | dataset-transfer| coordinator → requester          | answer to a dataset-request                  |
 *
 * "Every replica" means every member holding θ_global: synced workers and the host. The bodies of
 * the kinds that move bytes (state, the room's text, dataset files, pipe) are in
 * transfer-messages.ts.
 */

import { type CodecName, LOW_RANK_RUNGS } from '@shoal/diloco';
import { z } from 'zod';
import { peerKeySchema, signatureSchema } from './identity.ts';
import { MAX_FRAGMENTS, MAX_MEMBERS, MAX_PARTICIPANTS, MAX_PIPELINE_STAGES } from './limits.ts';
import { roundOpenBody } from './round-open.ts';
import {
  capabilitiesSchema,
  countSchema,
  dataLedgerSchema,
  deadlineSchema,
  fragmentStateSchema,
  hashHexSchema,
  nonNegativeSchema,
  peerIdSchema,
  peerListSchema,
  reasonSchema,
  roleSchema,
  roundSchema,
  runConfigSchema,
  shardPositionSchema,
  textSchema,
} from './schemas.ts';
import {
  corpusRequestBody,
  corpusTransferBody,
  datasetRequestBody,
  datasetTransferBody,
  pipeBody,
  stateRequestBody,
  stateTransferBody,
} from './transfer-messages.ts';

export { pipePayloadBytes } from './transfer-messages.ts';

/** Same major: compatible. Another major is rejected on decode. A new minor only adds optional fields. */
export const PROTOCOL_VERSION = { major: 1, minor: 8 } as const;

/** Join: role and what this member's machine can do. The header's run id is 0 while the run is not known. */
const helloBody = z.object({
  role: roleSchema,
  /** Application build, for the roster ("shoal-web 0.1.0"). */
  client: textSchema,
  capabilities: capabilitiesSchema,
  /** A replica reconnecting with state it already holds; empty for a new member. */
  holds: z.array(fragmentStateSchema).max(MAX_FRAGMENTS),
  /**
   * The sender's own inner-step count (a worker returning to a restarted host): the coordinator
   * counts its progress from here. Absent or 0 for a new member.
   */
  innerStep: countSchema.optional(),
  /**
   * The sender's public key (minor 3, identity.ts), as it announced it to the signaling server: a
   * hello whose key differs from the server's binding is refused. Absent from older peers.
   */
  key: peerKeySchema.optional(),
});

/** Join accepted: the run's settings, where its fragments stand, and where to fetch them. */
const welcomeBody = z.object({
  config: runConfigSchema,
  /** The last committed state of every fragment; the joiner is synced once it holds all of them. */
  fragments: z.array(fragmentStateSchema).min(1),
  roomTokens: countSchema,
  /** The member to send state-requests to; null when the joiner can start from the seeded init. */
  stateFrom: peerIdSchema.nullable(),
});

/**
 * A worker's place in a pipeline-parallel room (minor 6): replica group `group`, stage `stage`.
 * `version` changes whenever the group's members change, so its stages drop the traffic of the
 * group as it was.
 */
export const pipelineSlotSchema = z.object({
  group: z.int().min(0).max(MAX_MEMBERS),
  stage: z
    .int()
    .min(0)
    .max(MAX_PIPELINE_STAGES - 1),
  version: countSchema,
});
export type PipelineSlot = z.infer<typeof pipelineSlotSchema>;

const memberSchema = z.object({
  peer: peerIdSchema,
  role: roleSchema,
  status: z.enum(['joining', 'syncing', 'synced', 'diverged', 'unreachable', 'excluded']),
  /** Why a member is unreachable or excluded ("no TURN server configured"); empty otherwise. */
  reason: textSchema,
  capabilities: capabilitiesSchema,
  /** Its group and stage in a pipeline-parallel room; absent otherwise, and for one not yet placed. */
  pipeline: pipelineSlotSchema.optional(),
});
export type Member = z.infer<typeof memberSchema>;

/** The whole room, sent again on every change (idempotent, so a lost update heals itself). */
const rosterBody = z.object({
  /** Increases with every roster; an older one than the last seen is ignored. */
  epoch: countSchema,
  coordinator: peerIdSchema,
  members: z.array(memberSchema).max(MAX_MEMBERS),
  /** A dataset room's ledger: where each training shard stands. Absent in one-text rooms. */
  data: dataLedgerSchema.optional(),
});

/** Distinct reasons a heartbeat's rejection counts may name (a sender keeps its first ones). */
export const MAX_REJECTION_REASONS = 32;

/** Progress: what the coordinator opens rounds, weights and the dashboard from. */
const heartbeatBody = z.object({
  /**
   * A dataset room: the shards it drew from since its last heartbeat and where it stands in each
   * (the ledger's source). Absent in one-text rooms and from older peers.
   */
  data: z.array(shardPositionSchema).max(16).optional(),
  innerStep: countSchema,
  /** Tokens trained since this member's last contribution to each fragment, index = fragment. */
  tokensSinceContribution: z.array(countSchema).max(MAX_FRAGMENTS),
  /** Last train loss; null before the first step or for a member that does not train. */
  loss: z.number().nullable(),
  tokensPerSecond: nonNegativeSchema,
  bytesSent: countSchema,
  bytesReceived: countSchema,
  /** Inner steps that waited on the network (a second round of a fragment still open). */
  stalls: countSchema,
  /** The peers this member has an open channel to: connectivity is part of membership. */
  reachable: peerListSchema(MAX_MEMBERS),
  /**
   * Its contributions that shard owners refused, by reason, counted from their `rejected`
   * answers: owners are workers, so only the sender can tell the host. Absent from older peers.
   */
  rejectedContributions: z
    .record(reasonSchema, countSchema)
    .refine((counts) => Object.keys(counts).length <= MAX_REJECTION_REASONS, {
      message: `at most ${MAX_REJECTION_REASONS} reasons`,
    })
    .optional(),
  /**
   * Per fragment (index = fragment), the relative error of its last low-rank contribution at each
   * rank of the ladder up to the round's (1, 2, 4, …; minor 5): the coordinator's adaptive rank
   * reads the participants' median (docs/lowrank.md). Absent from older peers and in dense rooms.
   */
  lowRankErrors: z
    .array(z.array(z.number().min(0).max(1)).max(LOW_RANK_RUNGS.length))
    .max(MAX_FRAGMENTS)
    .optional(),
  /**
   * The rounds whose shards this member owns and has not finished (minor 8): per round, the
   * participants whose contribution it still waits for. The host names them on the room's pages.
   * Absent from older peers.
   */
  waitingFor: z
    .array(z.object({ fragment: countSchema, round: countSchema, peers: peerListSchema(MAX_PARTICIPANTS) }))
    .max(2 * MAX_FRAGMENTS)
    .optional(),
});

/**
 * The sender's signature over signedBytes (identity.ts; minor 3) of a contribution, shard result
 * or hash report. Absent from older peers and from peers without a key.
 */
const signed = { signature: signatureSchema.optional() };

/** Δ shard `shard` of the participant, weight = tokens (header), payload = codec bytes. */
const contributionBody = z.object(signed);

const verdictSchema = z.object({
  peer: peerIdSchema,
  /** Accepted: the weight used (after the cap). Rejected: 0. */
  weight: countSchema,
  /** Empty when accepted; a code like 'non-finite', 'length', 'norm', 'codec', 'missing' otherwise. */
  reason: z.union([z.literal(''), reasonSchema]),
  message: textSchema,
});
export type ContributionVerdict = z.infer<typeof verdictSchema>;

/**
 * The aggregated shard, encoded once (payload) and sent to every replica, and the fate of each
 * participant's contribution. No accepted contribution: empty payload (the round will abort).
 */
const shardResultBody = z.object({
  verdicts: z.array(verdictSchema).max(MAX_PARTICIPANTS),
  /**
   * hash(payload ‖ the accepted peers, in round order): what the shard's owner and checker
   * compare (minor 2). Absent from older peers.
   */
  resultHash: hashHexSchema.optional(),
  /**
   * A checker's report (minor 2): the payload is empty and `resultHash` says what the checker
   * computed; replicas apply the owner's payload only once the two agree.
   */
  check: z.boolean().optional(),
  ...signed,
});

/** hash(θ_global'[p] ‖ m'[p]) after the tentative outer step of round (fragment, round). */
const hashReportBody = z.object({ hash: hashHexSchema, ...signed });

/** Adopt the tentative state of (fragment, round). A replica whose hash differs is diverged. */
const commitBody = z.object({
  hash: hashHexSchema,
  /** Participants whose Δ is in the committed aggregate. */
  contributors: peerListSchema(MAX_PARTICIPANTS),
  roomTokens: countSchema,
});

/** Discard the tentative state of (fragment, round); training goes on. */
const abortBody = z.object({
  reason: z.enum(['deadline', 'quorum', 'hash-disagreement', 'no-contributions', 'coordinator-left']),
  message: textSchema,
});

/** Shard `shard` of (fragment, round) has a new owner: participants resend their kept payload to it. */
const reassignBody = z
  .object({ owner: peerIdSchema, previous: peerIdSchema, deadlineMs: deadlineSchema })
  .refine((body) => body.owner !== body.previous, 'the new owner must differ from the previous one');

/** "Your message was refused": `about` is its kind, or 'unknown' when it could not be decoded. */
const rejectedBody = z.object({
  about: z.string().max(32),
  reason: reasonSchema,
  message: textSchema,
  fragment: z.int().min(0).optional(),
  round: roundSchema.optional(),
  shard: z.int().min(0).optional(),
});

/** Leaving on purpose (SIGINT, tab closed): no need to wait for a timeout. */
const leaveBody = z.object({ reason: textSchema });

export type HeaderField = 'fragment' | 'round' | 'shard' | 'codec' | 'weight';

interface KindSpec {
  /** The header's kind byte. Never renumber or reuse; append. Retired: 5 (a room-level `metrics` message nothing sent). */
  id: number;
  header: readonly HeaderField[];
  payload: boolean;
  body: z.ZodType<object>;
}

export const MESSAGE_SPECS = {
  hello: { id: 1, header: [], payload: false, body: helloBody },
  welcome: { id: 2, header: [], payload: false, body: welcomeBody },
  roster: { id: 3, header: [], payload: false, body: rosterBody },
  heartbeat: { id: 4, header: [], payload: false, body: heartbeatBody },
  'round-open': { id: 6, header: ['fragment', 'round', 'codec'], payload: false, body: roundOpenBody },
  contribution: {
    id: 7,
    header: ['fragment', 'round', 'shard', 'codec', 'weight'],
    payload: true,
    body: contributionBody,
  },
  'shard-result': { id: 8, header: ['fragment', 'round', 'shard', 'codec'], payload: true, body: shardResultBody },
  'hash-report': { id: 9, header: ['fragment', 'round'], payload: false, body: hashReportBody },
  commit: { id: 10, header: ['fragment', 'round'], payload: false, body: commitBody },
  abort: { id: 11, header: ['fragment', 'round'], payload: false, body: abortBody },
  reassign: { id: 12, header: ['fragment', 'round', 'shard'], payload: false, body: reassignBody },
  'state-request': { id: 13, header: ['fragment'], payload: false, body: stateRequestBody },
  'state-transfer': { id: 14, header: ['fragment', 'round'], payload: true, body: stateTransferBody },
  rejected: { id: 15, header: [], payload: false, body: rejectedBody },
  leave: { id: 16, header: [], payload: false, body: leaveBody },
  'corpus-request': { id: 17, header: [], payload: false, body: corpusRequestBody },
  'corpus-transfer': { id: 18, header: [], payload: true, body: corpusTransferBody },
  pipe: { id: 19, header: [], payload: true, body: pipeBody },
  'dataset-request': { id: 20, header: [], payload: false, body: datasetRequestBody },
  'dataset-transfer': { id: 21, header: [], payload: true, body: datasetTransferBody },
} as const satisfies Record<string, KindSpec>;

type Specs = typeof MESSAGE_SPECS;
export type MessageKind = keyof Specs;
export const MESSAGE_KINDS = Object.keys(MESSAGE_SPECS) as MessageKind[];

const KIND_BY_ID = new Map<number, MessageKind>(MESSAGE_KINDS.map((kind) => [MESSAGE_SPECS[kind].id, kind]));

/** The kind for a header's kind byte, or undefined for one this version does not know. */
export function kindOfId(id: number): MessageKind | undefined {
  return KIND_BY_ID.get(id);
}

/** Header fields as the message carries them (codec by name; wire.ts maps it to CODEC_IDS). */
export interface HeaderValues {
  fragment: number;
  round: number;
  shard: number;
  codec: CodecName;
  /** Tokens behind a contribution: a safe integer ≥ 1. */
  weight: number;
}

type Simplify<T> = { [K in keyof T]: T[K] } & {};

export type MessageOf<K extends MessageKind> = Simplify<
  { kind: K } & Pick<HeaderValues, Specs[K]['header'][number]> &
    z.output<Specs[K]['body']> &
    (Specs[K]['payload'] extends true ? { payload: Uint8Array } : unknown)
>;

export type Message = { [K in MessageKind]: MessageOf<K> }[MessageKind];

export type HelloMessage = MessageOf<'hello'>;
export type WelcomeMessage = MessageOf<'welcome'>;
export type RosterMessage = MessageOf<'roster'>;
export type HeartbeatMessage = MessageOf<'heartbeat'>;
export type RoundOpenMessage = MessageOf<'round-open'>;
export type ContributionMessage = MessageOf<'contribution'>;
export type ShardResultMessage = MessageOf<'shard-result'>;
export type HashReportMessage = MessageOf<'hash-report'>;
export type CommitMessage = MessageOf<'commit'>;
export type AbortMessage = MessageOf<'abort'>;
export type ReassignMessage = MessageOf<'reassign'>;
export type StateRequestMessage = MessageOf<'state-request'>;
export type StateTransferMessage = MessageOf<'state-transfer'>;
export type RejectedMessage = MessageOf<'rejected'>;
export type LeaveMessage = MessageOf<'leave'>;
export type CorpusRequestMessage = MessageOf<'corpus-request'>;
export type CorpusTransferMessage = MessageOf<'corpus-transfer'>;
export type PipeMessage = MessageOf<'pipe'>;
export type DatasetRequestMessage = MessageOf<'dataset-request'>;
export type DatasetTransferMessage = MessageOf<'dataset-transfer'>;
