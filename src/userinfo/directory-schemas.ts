// Route schemas of the extended userinfo, the user lookup and the groups API, for the OpenAPI
// document. Inputs are checked by the handlers (after authentication); the schemas describe them.
const errorBody = {
  type: 'object',
  description: 'Error: code equals the HTTP status; 401 and 403 carry an RFC 6750 WWW-Authenticate challenge',
  required: ['code', 'message'],
  properties: { code: { type: 'integer' }, message: { type: 'string' } },
  additionalProperties: false,
} as const;

const error = (code: number, message: string) => ({ ...errorBody, examples: [{ code, message }] });

const userToken =
  'A user access token from the authorization code (or device) flow, in Authorization: Bearer; a client-credentials token is refused with 403.';
const bearer = [{ bearer: [] }];

const attributes = {
  type: 'object',
  description:
    'Directory attributes by their eduPerson / norEdu* names; each appears only when its attribute group is released and the user has a value (docs/userinfo.md)',
  properties: {
    cn: { type: 'array', items: { type: 'string' } },
    displayName: { type: 'string' },
    givenName: { type: 'array', items: { type: 'string' } },
    sn: { type: 'array', items: { type: 'string' } },
    eduPersonPrincipalName: { type: 'string' },
    uid: { type: 'array', items: { type: 'string' } },
    norEduPersonNIN: { type: 'string' },
    mail: { type: 'string' },
    eduPersonAffiliation: { type: 'array', items: { type: 'string' } },
    eduPersonPrimaryAffiliation: { type: 'string' },
    'eduPersonOrgUnitDN:ou': { type: 'array', items: { type: 'string' } },
    title: { type: 'array', items: { type: 'string' } },
    eduPersonEntitlement: { type: 'array', items: { type: 'string' } },
    norEduPersonLIN: { type: 'array', items: { type: 'string' } },
  },
  additionalProperties: false,
  examples: [
    {
      cn: ['Alice Example'],
      displayName: 'Alice Example',
      givenName: ['Alice'],
      sn: ['Example'],
      eduPersonPrincipalName: 'alice@example.org',
      uid: ['alice'],
      eduPersonAffiliation: ['employee', 'faculty', 'member'],
      eduPersonPrimaryAffiliation: 'faculty',
      eduPersonEntitlement: ['urn:mace:example.org:library'],
    },
  ],
} as const;

export const extendedUserinfoSchema = {
  operationId: 'extendedUserinfo',
  summary: "The signed-in user's directory attributes",
  description: `${userToken} Attributes are released per the client's attribute groups and the scopes granted (docs/userinfo.md).`,
  tags: ['userinfo'],
  security: bearer,
  response: {
    200: attributes,
    400: error(400, 'Malformed Authorization header'),
    401: error(401, 'The access token is invalid or has expired'),
    403: error(403, 'The access token is not bound to a user'),
  },
};

export const lookupSchema = {
  operationId: 'userLookup',
  summary: 'Look up a user by eppn or sub',
  description:
    "A client-credentials token with scope system-all-users. Only users of the organizations the client is granted (client grant-orgs) are found; attributes are released per the client's attribute groups.",
  tags: ['userinfo'],
  security: [{ oauth2: ['system-all-users'] }],
  params: {
    type: 'object',
    required: ['id'],
    properties: {
      id: {
        type: 'string',
        description: 'The eppn (user@realm) or the sub (UUID) of the user',
        examples: ['alice@example.org'],
      },
    },
  },
  response: {
    200: attributes,
    401: error(401, 'Token missing or invalid'),
    403: error(403, 'Token must have all required scopes'),
    404: error(404, 'User does not exist'),
  },
};

const membership = {
  type: 'object',
  required: ['basic'],
  properties: {
    basic: { type: 'string', enum: ['member', 'admin', 'owner'] },
    displayName: { type: 'string', description: "The directory's role, as a label" },
    affiliation: { type: 'array', items: { type: 'string' }, description: 'Organization groups: eduPersonAffiliation' },
    primaryAffiliation: { type: 'string', description: 'Organization groups: eduPersonPrimaryAffiliation' },
  },
  additionalProperties: false,
} as const;

const group = {
  type: 'object',
  required: ['id', 'type', 'displayName'],
  properties: {
    id: { type: 'string' },
    type: { type: 'string', enum: ['fc:org', 'fc:basisgroup', 'fc:gogroup', 'voot:default'] },
    displayName: { type: 'string' },
    parent: { type: 'string', description: 'The organization group' },
    membership,
  },
  additionalProperties: false,
} as const;

const groupExample = {
  id: 'fc:gogroup:example.org:6f2a9c3e-1b4d-4e8f-9a7c-2d5e8f1b3c4a',
  type: 'fc:gogroup',
  displayName: 'Mathematics 1A',
  parent: 'fc:org:example.org',
  membership: { basic: 'admin', displayName: 'Teacher' },
};

const groupId = {
  type: 'object',
  required: ['id'],
  properties: {
    id: { type: 'string', description: 'A group id, as in /groups/me/groups', examples: [groupExample.id] },
  },
} as const;

const groupErrors = {
  400: error(400, 'Malformed Authorization header'),
  401: error(401, 'The access token is invalid or has expired'),
  403: error(403, 'The access token is not bound to a user'),
};

export const myGroupsSchema = {
  operationId: 'myGroups',
  summary: "The signed-in user's groups",
  description: `${userToken} Each kind of group needs its attribute group: groups-org (fc:org), groups-edu (fc:basisgroup, fc:gogroup), groups-other (voot:default).`,
  tags: ['groups'],
  security: bearer,
  response: { 200: { type: 'array', items: group, examples: [[groupExample]] }, ...groupErrors },
};

export const myMembershipSchema = {
  operationId: 'myMembership',
  summary: "The signed-in user's membership of one group",
  description: userToken,
  tags: ['groups'],
  security: bearer,
  params: groupId,
  response: {
    200: { ...membership, examples: [groupExample.membership] },
    ...groupErrors,
    404: error(404, 'Group does not exist'),
  },
};

export const groupSchema = {
  operationId: 'groupDetails',
  summary: 'A group the signed-in user is a member of',
  description: userToken,
  tags: ['groups'],
  security: bearer,
  params: groupId,
  response: {
    200: {
      ...group,
      examples: [
        {
          id: groupExample.id,
          type: groupExample.type,
          displayName: groupExample.displayName,
          parent: groupExample.parent,
        },
      ],
    },
    ...groupErrors,
    404: error(404, 'Group does not exist'),
  },
};

export const groupMembersSchema = {
  operationId: 'groupMembers',
  summary: 'Members of a group the signed-in user is a member of',
  description: `${userToken} Names and roles only; not for organization groups (403). At most 5000 members, by name.`,
  tags: ['groups'],
  security: bearer,
  params: groupId,
  response: {
    200: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'membership'],
        properties: { name: { type: 'string' }, membership },
        additionalProperties: false,
      },
      examples: [[{ name: 'Bob Example', membership: { basic: 'member', displayName: 'Student' } }]],
    },
    ...groupErrors,
    404: error(404, 'Group does not exist'),
  },
};

export const groupTypesSchema = {
  operationId: 'groupTypes',
  summary: 'The group types',
  description: userToken,
  tags: ['groups'],
  security: bearer,
  response: {
    200: {
      type: 'array',
      items: {
        type: 'object',
        required: ['id', 'displayName'],
        properties: {
          id: { type: 'string' },
          displayName: {
            type: 'object',
            required: ['en', 'nb'],
            properties: { en: { type: 'string' }, nb: { type: 'string' } },
            additionalProperties: false,
          },
        },
        additionalProperties: false,
      },
      examples: [[{ id: 'fc:gogroup', displayName: { en: 'Teaching group', nb: 'Undervisningsgruppe' } }]],
    },
    ...groupErrors,
  },
};
