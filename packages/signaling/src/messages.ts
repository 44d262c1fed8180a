/**
 * The signaling protocol at `/signal`: JSON text frames, one message each, a discriminated union
 * on `kind`. Shared by the server (apps/server) and the client (client.ts), so it imports nothing
 * from Node.
 *
 * | kind         | direction              | fields                                                        |
 * | ------------ | ---------------------- | ------------------------------------------------------------- |
 * | create       | client → server        | version, key?                                                 |
 * | created      | server → host          | roomId, peerId, hostSecret, joinToken, watchKey, iceServers, limits |
 * | reclaim      | client → server        | version, roomId, hostSecret, key?                             |
 * | reclaimed    | server → host          | roomId, peerId, joinToken, watchKey, peers, keys, iceServers, limits |
 * | join         | client → server        | version, roomId, token, key?                                  |
 * | rejoin       | client → server        | version, roomId, peerId, memberSecret, key?                   |
 * | joined       | server → member        | roomId, peerId, memberSecret (join only), hostId, hostPresent, peers, keys, iceServers, limits |
 * | peer-joined  | server → room          | peer (the host's id when the host comes back), key            |
 * | peer-left    | server → room          | peer, reason ('left', 'closed', 'kicked', 'timeout')          |
 * | signal       | client → server        | to, data (opaque SDP/ICE)                                     |
 * | signal       | server → peer          | from (set by the server), data                                |
 * | relay        | member → host          | data (to, if given, must be the host)                         |
 * | relay        | host → member(s)       | data, to (omitted: every member)                              |
 * | relay        | server → recipient     | from (set by the server), data                                |
 * | rotate-token | host → server          | —                                                             |
 * | token        | server → host          | joinToken                                                     |
 * | kick         | host → server          | peer, reason?                                                 |
 * | kicked       | server → member        | reason (the socket is then closed with 4001)                  |
 * | leave        | client → server        | — (the server closes with 1000)                               |
 * | publish      | host → server          | data (a RoomViewUpdate of @shoal/protocol, for the room's watchers) |
 * | watch        | client → server        | version, roomId, key (the room's watchKey)                    |
 * | watching     | server → watcher       | roomId, view (the latest update with every kept point, or null) |
 * | check        | client → server        | version, roomId, token                                        |
 * | checked      | server → client        | roomId, hostPresent, status, about                            |
 * | view         | server → watchers      | data (each later publish, with just its own points)           |
 * | error        | server → client        | code, message, ref? (the kind that caused it)                 |
 *
 * Watching: the watch link (`/watch/ROOM?key=KEY`) opens a socket that sends `watch` instead of
 * create/reclaim/join. A watcher is not a member: it is in no peers list, takes no seat, and may
 * not signal, relay, publish or enter a room (every such frame gets an error). The watch key is
 * issued with the room and never rotates. When the room ends (its grace period runs out with
 * nobody in it) the server closes each watcher's socket with 4002 'room closed'; while the host is
 * away, watchers keep the last view.
 *
 * A publish may be larger than other frames (maxPublishBytes against maxFrameBytes): only a
 * host's frame may exceed maxFrameBytes, and then only a publish; the server keeps per room the
 * latest update without its points plus a thinned series of all points (bounded in count and
 * bytes), and rate-limits publishes per host.
 *
 * Per client address (an IPv6 /64 counts as one) the server holds at most so many sockets (more
 * get 'too-many-connections-per-ip' and are closed with 1013) and so many rooms created there
 * ('too-many-rooms-per-ip'), and a room-creation rate ('room-rate-limited'); the fan-out to one
 * room's watchers has a byte budget (a `watch` over it gets 'watch-budget'; a watcher that misses a
 * view gets its points with the next one).
 *
 * Coming back (minor 2): the host takes its room back with its host secret (reclaim) and keeps its
 * peer id for the room's life. A member gets a member secret with its first `joined`; with it,
 * `rejoin` seats it again under the same peer id after a reconnect or a server restart (the join
 * token is not asked again, so a rotated token strands nobody who joined). A rejoin is refused with
 * 'bad-secret' (wrong secret, or an id the room does not know), 'kicked' (the host removed it),
 * 'peer-present' (the id is still seated: its old socket has not timed out yet), 'key-changed' (it
 * announces another key than it joined with) or 'room-full'. A member whose secret is refused may
 * join anew with the join token (a new peer id; reconnect.ts does so when it has the token).
 *
 * Membership: a room remembers at most 4 × maxPeersPerRoom members for coming back and
 * never forgets an absent one to make room for a new one: a join beyond that is refused with
 * 'room-full' (until members leave for good or the host kicks them). Joins are paced per address
 * (wrong tokens included) and per room ('join-rate-limited'), checks per address
 * ('check-rate-limited'). Signals have a byte budget per sender ('signal-budget'), and a signal or
 * relay to a receiver that is not reading is dropped ('receiver-busy') instead of closing it.
 * The server keeps its rooms across a restart when it has a rooms directory (docs/deployment.md),
 * so credentials from before the restart still work.
 *
 * Checking (minor 2): before a person consents to join, the join page asks whether the room exists
 * and the token admits (`check`); the answer tells whether the host is there, the run's status and
 * what it trains (`about`: model preset and size, text), from the host's latest published view.
 * It seats nothing: the socket may check again, or join, watch or create afterwards. A wrong token
 * gets 'bad-token' and nothing else, so a check leaks nothing a join would not.
 *
 * Keys (minor 1): a client may announce its public key (`key`, @shoal/protocol identity.ts) when
 * it creates, reclaims or joins a room; the server binds it to the peer id it hands out and tells
 * the others with that id: `keys` in joined and reclaimed (the peers present that have one), `key`
 * in peer-joined (null: the peer announced none). There is no message to change a key, and a
 * member that rejoins must announce the key it joined with ('key-changed' otherwise), so a
 * member's key is fixed for its peer id in the room; a host that reclaims the room (proving itself
 * with the host secret) may announce a new key, since a restarted `shoal host --resume` or a
 * reloaded dashboard has a new key pair.
 * The server binds, it does not vouch: a peer may announce someone else's public key, which only
 * makes its own signatures fail, since what a peer signs names its peer id.
 *
 * Versioning: create, reclaim, join and watch carry the client's major version; another major gets
 * `error` with code 'version'. Objects strip unknown keys, so a newer minor may add optional
 * fields without breaking older peers (as in @shoal/protocol).
 */
import { peerKeySchema, roomStatusSchema, roomViewUpdateSchema } from '@shoal/protocol';
import { z } from 'zod';

export const SIGNAL_PROTOCOL_VERSION = { major: 1, minor: 2 } as const;

/** Where a Shoal server takes signaling sockets, beside its web app on the same port. */
export const SIGNAL_PATH = '/signal';

/** WebSocket close codes the server uses. */
export const CLOSE_CODES = {
  normal: 1000,
  /** Policy: floods, a socket that never entered a room, a frame that cannot be parsed at all. */
  policy: 1008,
  /** A frame over maxFrameBytes (sent by `ws` itself). */
  tooBig: 1009,
  /** The server is at maxConnections, or the address at maxConnectionsPerIp. */
  tryAgainLater: 1013,
  /** Kicked by the host. */
  kicked: 4001,
  /** To a watcher: the room it watched has ended. */
  roomClosed: 4002,
} as const;

/** Reason codes of `error` messages. */
export const SIGNAL_ERROR_CODES = [
  'bad-json',
  'binary-frame',
  'too-deep',
  'unknown-kind',
  'schema',
  'version',
  'rate-limited',
  'relay-budget',
  'not-in-room',
  'already-in-room',
  'not-host',
  'no-such-room',
  'bad-token',
  'bad-secret',
  /** A rejoin by a member the host kicked. */
  'kicked',
  /** A rejoin while the same peer id is still seated (its old socket not yet timed out). */
  'peer-present',
  /** A watch with the wrong watch key. */
  'bad-key',
  'host-present',
  'room-full',
  'too-many-rooms',
  /** The creating address holds maxRoomsPerIp rooms already. */
  'too-many-rooms-per-ip',
  /** The creating address is over roomCreatesPerMinutePerIp. */
  'room-rate-limited',
  'unknown-peer',
  /**
   * A join over its address's or its room's join rate (the message says which); try again in a
   * few seconds. Wrong tokens spend the address's budget too.
   */
  'join-rate-limited',
  /** A check over its address's check rate; try again in a few seconds. */
  'check-rate-limited',
  /** A rejoin that announces another key (or none) than its peer id is bound to in this room. */
  'key-changed',
  /** Signals over the sender's byte budget: dropped, not relayed (answered at most once a second). */
  'signal-budget',
  /**
   * A signal or relay dropped because its receiver has too much queued (it is not reading); the
   * receiver is not closed for it. Answered at most once a second.
   */
  'receiver-busy',
  'server-full',
  /** The connecting address has maxConnectionsPerIp sockets open (the socket is closed with 1013). */
  'too-many-connections-per-ip',
  /** A watch refused while the room's watch fan-out budget is spent; try again in a few seconds. */
  'watch-budget',
  'hello-timeout',
  'too-big',
  'internal',
] as const;
export type SignalErrorCode = (typeof SIGNAL_ERROR_CODES)[number];

// Server-issued identifiers: base64url, so they fit in URLs (join links) untouched.
const idSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_-]+$/, 'ids are base64url');
const versionSchema = z.int().min(0).max(1000);
/** Opaque to the server: relayed as parsed JSON. Must be present; size is bounded by the frame. */
const opaqueSchema = z.unknown().refine((value) => value !== undefined, 'data is required');

export const iceServerSchema = z.object({
  urls: z.union([z.string().min(1).max(512), z.array(z.string().min(1).max(512)).min(1).max(16)]),
  username: z.string().max(512).optional(),
  credential: z.string().max(512).optional(),
});
export type IceServer = z.infer<typeof iceServerSchema>;

/** The limits a client should respect, told in created/reclaimed/joined. */
const clientLimitsSchema = z.object({
  maxFrameBytes: z.int().min(1),
  messagesPerSecond: z.number().min(0),
  messageBurst: z.number().min(0),
  maxPeersPerRoom: z.int().min(1),
  /** The largest publish frame a host may send. Absent from older servers. */
  maxPublishBytes: z.int().min(1).optional(),
});
export type ClientLimits = z.infer<typeof clientLimitsSchema>;

/** A peer's public key as the server bound it to the peer's id. */
const boundKeySchema = z.object({ peer: idSchema, key: peerKeySchema });
export type BoundKey = z.infer<typeof boundKeySchema>;

/** The public key a client announces for itself (minor 1); absent from older clients. */
const announcedKey = peerKeySchema.optional();

export const clientMessageSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('create'), version: versionSchema, key: announcedKey }),
  z.object({
    kind: z.literal('reclaim'),
    version: versionSchema,
    roomId: idSchema,
    hostSecret: idSchema,
    key: announcedKey,
  }),
  z.object({ kind: z.literal('join'), version: versionSchema, roomId: idSchema, token: idSchema, key: announcedKey }),
  z.object({
    kind: z.literal('rejoin'),
    version: versionSchema,
    roomId: idSchema,
    peerId: idSchema,
    memberSecret: idSchema,
    key: announcedKey,
  }),
  z.object({ kind: z.literal('signal'), to: idSchema, data: opaqueSchema }),
  z.object({ kind: z.literal('relay'), to: idSchema.optional(), data: opaqueSchema }),
  z.object({ kind: z.literal('rotate-token') }),
  z.object({ kind: z.literal('kick'), peer: idSchema, reason: z.string().max(256).optional() }),
  z.object({ kind: z.literal('leave') }),
  z.object({ kind: z.literal('publish'), data: roomViewUpdateSchema }),
  z.object({ kind: z.literal('watch'), version: versionSchema, roomId: idSchema, key: idSchema }),
  z.object({ kind: z.literal('check'), version: versionSchema, roomId: idSchema, token: idSchema }),
]);
export type ClientMessage = z.infer<typeof clientMessageSchema>;
export const CLIENT_MESSAGE_KINDS: readonly string[] = clientMessageSchema.options.map(
  (option) => option.shape.kind.value,
);

/**
 * What a room trains, told by `checked` before a person joins: read off the host's latest published
 * view (null before its first publish). `preset`: the model preset whose shape the run's model has
 * (null: a custom shape); `params`: its parameter count; `corpus`: the text's name.
 */
export const roomAboutSchema = z.object({
  preset: z.string().max(64).nullable(),
  params: z.int().min(0).nullable(),
  corpus: z.string().max(256).nullable(),
});
export type RoomAbout = z.infer<typeof roomAboutSchema>;

const peerLeftReason = z.enum(['left', 'closed', 'kicked', 'timeout']);
export type PeerLeftReason = z.infer<typeof peerLeftReason>;

export const serverMessageSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('created'),
    roomId: idSchema,
    peerId: idSchema,
    hostSecret: idSchema,
    joinToken: idSchema,
    /** The read-only watch link's key; fixed for the room's life. Absent from older servers. */
    watchKey: idSchema.optional(),
    iceServers: z.array(iceServerSchema),
    limits: clientLimitsSchema,
  }),
  z.object({
    kind: z.literal('reclaimed'),
    roomId: idSchema,
    peerId: idSchema,
    joinToken: idSchema,
    /** The same watch key as at create. Absent from older servers. */
    watchKey: idSchema.optional(),
    peers: z.array(idSchema),
    /** The keys of those `peers` that announced one. Absent from older servers. */
    keys: z.array(boundKeySchema).optional(),
    iceServers: z.array(iceServerSchema),
    limits: clientLimitsSchema,
  }),
  z.object({
    kind: z.literal('joined'),
    roomId: idSchema,
    peerId: idSchema,
    /** With a first join: the secret with which this member rejoins as `peerId`. Absent after a rejoin and from older servers. */
    memberSecret: idSchema.optional(),
    hostId: idSchema,
    /** False while the host is away (reconnecting within the grace period). */
    hostPresent: z.boolean(),
    /** Everyone else in the room now, the host included when present. */
    peers: z.array(idSchema),
    /** The keys of those `peers` that announced one. Absent from older servers. */
    keys: z.array(boundKeySchema).optional(),
    iceServers: z.array(iceServerSchema),
    limits: clientLimitsSchema,
  }),
  z.object({
    kind: z.literal('peer-joined'),
    peer: idSchema,
    /** The key bound to `peer`; null when it announced none. Absent from older servers. */
    key: peerKeySchema.nullable().optional(),
  }),
  z.object({ kind: z.literal('peer-left'), peer: idSchema, reason: peerLeftReason }),
  z.object({ kind: z.literal('signal'), from: idSchema, data: opaqueSchema }),
  z.object({ kind: z.literal('relay'), from: idSchema, data: opaqueSchema }),
  z.object({ kind: z.literal('token'), joinToken: idSchema }),
  z.object({ kind: z.literal('kicked'), reason: z.string().max(256) }),
  z.object({ kind: z.literal('watching'), roomId: idSchema, view: roomViewUpdateSchema.nullable() }),
  z.object({ kind: z.literal('view'), data: roomViewUpdateSchema }),
  z.object({
    kind: z.literal('checked'),
    roomId: idSchema,
    hostPresent: z.boolean(),
    /** The run's status in the host's latest view; null before its first publish. */
    status: roomStatusSchema.nullable(),
    about: roomAboutSchema.nullable(),
  }),
  z.object({
    kind: z.literal('error'),
    code: z.enum(SIGNAL_ERROR_CODES),
    message: z.string().max(1024),
    ref: z.string().max(64).optional(),
  }),
]);
export type ServerMessage = z.infer<typeof serverMessageSchema>;
export type ServerMessageOf<K extends ServerMessage['kind']> = Extract<ServerMessage, { kind: K }>;
