// JSON schemas of the Shared Signals routes; the OpenAPI document is generated from them. Bodies
// are checked by the handlers, which give each mistake its own message; the schemas describe them.
const TAGS = ['shared-signals'];
const SECURITY = [{ oauth2: ['ssf.manage'] }];
const PUSH = 'urn:ietf:rfc:8935';
const CREDENTIAL_CHANGE = 'https://schemas.openid.net/secevent/caep/event-type/credential-change';
const STREAM_ID = '0f8e3c1a-6a52-4d0b-9a55-7d8b8f2f1c3e';
/** The SETs one poll may acknowledge (ack) and report as refused (setErrs): ten polls' worth. */
export const MAX_SETTLED_PER_POLL = 1000;

const errorBody = (code: number, message: string) => ({
  type: 'object',
  description: 'Error: code equals the HTTP status',
  required: ['code', 'message'],
  properties: { code: { type: 'integer' }, message: { type: 'string' } },
  examples: [{ code, message }],
});

const errors = {
  400: errorBody(400, "events_requested: unsupported event type 'urn:example'"),
  401: errorBody(401, 'Token missing or invalid'),
  403: errorBody(403, 'Token must have all required scopes'),
  404: errorBody(404, 'Stream not found'),
};

const streamExample = {
  stream_id: STREAM_ID,
  iss: 'https://idp.example.org',
  aud: 'c1d2e3f4',
  delivery: { method: PUSH, endpoint_url: 'https://receiver.example.com/ssf/events' },
  events_supported: [CREDENTIAL_CHANGE],
  events_requested: [CREDENTIAL_CHANGE],
  events_delivered: [CREDENTIAL_CHANGE],
  min_verification_interval: 60,
  description: 'Sessions of the learning platform',
};

const stream = {
  type: 'object',
  description: 'A stream configuration (SSF 1.0, 8.1.1)',
  properties: {
    stream_id: { type: 'string' },
    iss: { type: 'string' },
    aud: { type: 'string' },
    delivery: {
      type: 'object',
      properties: { method: { type: 'string' }, endpoint_url: { type: 'string' } },
    },
    events_supported: { type: 'array', items: { type: 'string' } },
    events_requested: { type: 'array', items: { type: 'string' } },
    events_delivered: { type: 'array', items: { type: 'string' } },
    min_verification_interval: { type: 'integer' },
    description: { type: 'string' },
  },
};

const streamBody = (example: object) => ({
  type: 'object',
  properties: {
    stream_id: { type: 'string', description: 'the stream to change (PATCH, PUT)' },
    delivery: {
      type: 'object',
      description: `method ${PUSH} (push, RFC 8935: endpoint_url and an optional authorization_header the service sends) or urn:ietf:rfc:8936 (poll, RFC 8936: the service gives the endpoint)`,
    },
    events_requested: { type: 'array', items: { type: 'string' }, description: 'event type URIs' },
    description: { type: 'string' },
  },
  examples: [example],
});

const streamIdQuery = (required: boolean) => ({
  type: 'object',
  ...(required ? { required: ['stream_id'] } : {}),
  properties: { stream_id: { type: 'string', examples: [STREAM_ID] } },
});

const subjectBody = {
  type: 'object',
  properties: { stream_id: { type: 'string' }, subject: { type: 'object' } },
  examples: [
    {
      stream_id: STREAM_ID,
      subject: { format: 'iss_sub', iss: 'https://idp.example.org', sub: '3f1c5a9e-2b7d-4c1e-9a3f-6d2b8e0c4f71' },
    },
  ],
};

const status = {
  type: 'object',
  properties: { stream_id: { type: 'string' }, status: { type: 'string' }, reason: { type: 'string' } },
  examples: [{ stream_id: STREAM_ID, status: 'enabled' }],
};

const empty = { type: 'null', description: 'No content', examples: [null] };

export const metadata = {
  operationId: 'ssfConfiguration',
  summary: 'Shared Signals transmitter configuration metadata',
  tags: TAGS,
  security: [],
  response: {
    200: {
      type: 'object',
      additionalProperties: true,
      examples: [
        {
          spec_version: '1_0',
          issuer: 'https://idp.example.org',
          jwks_uri: 'https://idp.example.org/openid/jwks',
          delivery_methods_supported: [PUSH, 'urn:ietf:rfc:8936'],
          configuration_endpoint: 'https://idp.example.org/ssf/streams',
          default_subjects: 'ALL',
        },
      ],
    },
    400: errorBody(400, 'Malformed request URL'),
  },
};

export const createStream = {
  operationId: 'ssfCreateStream',
  summary: 'Create a stream',
  tags: TAGS,
  security: SECURITY,
  body: streamBody({
    delivery: { method: PUSH, endpoint_url: 'https://receiver.example.com/ssf/events' },
    events_requested: [CREDENTIAL_CHANGE],
  }),
  response: { 201: { ...stream, examples: [streamExample] }, ...errors },
};

export const readStream = {
  operationId: 'ssfReadStream',
  summary: "Read a stream, or without stream_id all of the client's streams",
  tags: TAGS,
  security: SECURITY,
  querystring: streamIdQuery(false),
  response: {
    200: { anyOf: [stream, { type: 'array', items: stream }], examples: [streamExample] },
    ...errors,
  },
};

export const updateStream = {
  operationId: 'ssfUpdateStream',
  summary: 'Change a stream (the properties given)',
  tags: TAGS,
  security: SECURITY,
  body: streamBody({ stream_id: STREAM_ID, events_requested: [CREDENTIAL_CHANGE] }),
  response: { 200: { ...stream, examples: [streamExample] }, ...errors },
};

export const replaceStream = {
  operationId: 'ssfReplaceStream',
  summary: 'Replace a stream configuration',
  tags: TAGS,
  security: SECURITY,
  body: streamBody({
    stream_id: STREAM_ID,
    delivery: { method: 'urn:ietf:rfc:8936' },
    events_requested: [CREDENTIAL_CHANGE],
  }),
  response: { 200: { ...stream, examples: [streamExample] }, ...errors },
};

export const deleteStream = {
  operationId: 'ssfDeleteStream',
  summary: 'Delete a stream and its undelivered events',
  tags: TAGS,
  security: SECURITY,
  querystring: streamIdQuery(true),
  response: { 204: empty, ...errors },
};

export const readStatus = {
  operationId: 'ssfReadStatus',
  summary: 'Read the status of a stream',
  tags: TAGS,
  security: SECURITY,
  querystring: streamIdQuery(true),
  response: { 200: status, ...errors },
};

export const updateStatus = {
  operationId: 'ssfUpdateStatus',
  summary: 'Enable, pause (events are kept) or disable (events are dropped) a stream',
  tags: TAGS,
  security: SECURITY,
  body: { ...status, examples: [{ stream_id: STREAM_ID, status: 'paused', reason: 'maintenance' }] },
  response: { 200: status, ...errors },
};

export const addSubject = {
  operationId: 'ssfAddSubject',
  summary: 'Add a subject: the stream then hears only about the subjects added',
  tags: TAGS,
  security: SECURITY,
  body: subjectBody,
  response: { 200: empty, ...errors },
};

export const removeSubject = {
  operationId: 'ssfRemoveSubject',
  summary: 'Remove a subject',
  tags: TAGS,
  security: SECURITY,
  body: subjectBody,
  response: { 204: empty, ...errors },
};

export const verify = {
  operationId: 'ssfVerify',
  summary: 'Ask for a verification event on the stream',
  tags: TAGS,
  security: SECURITY,
  body: {
    type: 'object',
    properties: { stream_id: { type: 'string' }, state: { type: 'string' } },
    examples: [{ stream_id: STREAM_ID, state: 'VGhpcyBpcyBhbiBleGFtcGxl' }],
  },
  response: {
    204: empty,
    ...errors,
    429: {
      ...errorBody(429, 'A verification event was requested less than 60 seconds ago (min_verification_interval)'),
      description: "A verification was requested within the stream's min_verification_interval",
      headers: {
        'retry-after': { type: 'string', description: 'Seconds until a verification may be requested again' },
      },
    },
  },
};

export const poll = {
  operationId: 'ssfPoll',
  summary: 'Poll delivery (RFC 8936): acknowledge received SETs and collect pending ones',
  tags: TAGS,
  security: SECURITY,
  params: {
    type: 'object',
    required: ['stream_id'],
    properties: { stream_id: { type: 'string', examples: [STREAM_ID] } },
  },
  body: {
    type: 'object',
    properties: {
      ack: {
        type: 'array',
        items: { type: 'string' },
        maxItems: MAX_SETTLED_PER_POLL,
        description: `jti values of the SETs received; at most ${MAX_SETTLED_PER_POLL} per poll`,
      },
      setErrs: {
        type: 'object',
        maxProperties: MAX_SETTLED_PER_POLL,
        description: `SETs the receiver refused, by jti; at most ${MAX_SETTLED_PER_POLL} per poll`,
      },
      maxEvents: { type: 'integer' },
      returnImmediately: { type: 'boolean' },
    },
    examples: [{ ack: ['set-41'], maxEvents: 10, returnImmediately: true }],
  },
  response: {
    200: {
      type: 'object',
      properties: {
        sets: { type: 'object', additionalProperties: { type: 'string' } },
        moreAvailable: { type: 'boolean' },
      },
      examples: [{ sets: { 'set-42': 'eyJhbGciOiJFUzI1NiIsInR5cCI6InNlY2V2ZW50K2p3dCJ9...' }, moreAvailable: false }],
    },
    ...errors,
  },
};
