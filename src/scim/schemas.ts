// The schemas the service speaks (RFC 7643 section 7 form): the core User and Group, the enterprise
// user extension and the service's education extension for users and groups. They are served by
// /Schemas and are what PATCH paths and attribute projections are checked against.

export const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const GROUP = 'urn:ietf:params:scim:schemas:core:2.0:Group';
export const ENTERPRISE = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';
/** The education extension (docs/provisioning.md): eduPerson attributes of a user. */
export const EDU_USER = 'urn:passkey-idp:params:scim:schemas:extension:education:2.0:User';
/**
 * The password extension (docs/provisioning.md): the hash another system made of a user's password,
 * written on create or replace, never returned.
 */
export const PASSWORD_USER = 'urn:passkey-idp:params:scim:schemas:extension:password:2.0:User';
/** The education extension of a group: its kind, and each member's role in it. */
export const EDU_GROUP = 'urn:passkey-idp:params:scim:schemas:extension:education:2.0:Group';
export const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
export const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

export interface Attribute {
  name: string;
  type: 'string' | 'boolean' | 'complex' | 'reference' | 'dateTime' | 'integer';
  multiValued: boolean;
  description: string;
  required: boolean;
  caseExact: boolean;
  mutability: 'readOnly' | 'readWrite' | 'immutable' | 'writeOnly';
  returned: 'always' | 'default' | 'never' | 'request';
  uniqueness: 'none' | 'server' | 'global';
  subAttributes?: Attribute[];
  referenceTypes?: string[];
  canonicalValues?: string[];
}

type Options = Partial<Omit<Attribute, 'name' | 'type' | 'description'>>;

function attr(name: string, type: Attribute['type'], description: string, o: Options = {}): Attribute {
  return {
    name,
    type,
    multiValued: false,
    description,
    required: false,
    caseExact: false,
    mutability: 'readWrite',
    returned: 'default',
    uniqueness: 'none',
    ...o,
  };
}

const str = (name: string, description: string, o: Options = {}) => attr(name, 'string', description, o);

const userCore: Attribute[] = [
  str('userName', "The user's eduPersonPrincipalName (user@realm); the realm is the organization's", {
    required: true,
    uniqueness: 'server',
  }),
  attr('name', 'complex', "The user's name", {
    subAttributes: [
      str('formatted', 'The full name'),
      str('familyName', 'The family name'),
      str('givenName', 'The given name'),
    ],
  }),
  str('displayName', 'The name shown to the user and to applications'),
  str('title', "The user's title"),
  attr('active', 'boolean', 'false: the user is disabled (no sign-in; sessions and tokens ended)'),
  attr('emails', 'complex', "The user's e-mail address (one)", {
    multiValued: true,
    subAttributes: [
      str('value', 'The address'),
      str('type', 'work', { canonicalValues: ['work'] }),
      attr('primary', 'boolean', 'Always true: the one address'),
    ],
  }),
  attr('groups', 'complex', 'The groups the user is a member of', {
    multiValued: true,
    mutability: 'readOnly',
    subAttributes: [
      str('value', 'The group id', { mutability: 'readOnly' }),
      attr('$ref', 'reference', 'The group', { mutability: 'readOnly', referenceTypes: ['Group'] }),
      str('display', 'The group name', { mutability: 'readOnly' }),
    ],
  }),
];

const enterprise: Attribute[] = [
  str('employeeNumber', 'The employee number'),
  str('department', "The user's organizational unit (the same value as the education extension's orgUnit)"),
];

const eduUser: Attribute[] = [
  str(
    'affiliation',
    'eduPersonAffiliation: student, faculty, staff, employee, member, affiliate, alum, library-walk-in',
    {
      multiValued: true,
      canonicalValues: ['student', 'faculty', 'staff', 'employee', 'member', 'affiliate', 'alum', 'library-walk-in'],
    },
  ),
  str('primaryAffiliation', 'eduPersonPrimaryAffiliation: one of the affiliations'),
  str('orgUnit', "The user's organizational unit (eduPersonOrgUnit)"),
  str('studentNumber', 'The student number'),
  attr('entitlement', 'reference', 'eduPersonEntitlement URIs', {
    multiValued: true,
    referenceTypes: ['uri'],
    caseExact: true,
  }),
];

const passwordUser: Attribute[] = [
  str(
    'passwordHash',
    "An existing hash of the user's password (bcrypt, PBKDF2, argon2, scrypt, LDAP {SSHA}): kept for a user who has neither a password nor a passkey, replaced by argon2id at their first sign-in",
    { mutability: 'writeOnly', returned: 'never', caseExact: true },
  ),
];

const groupCore: Attribute[] = [
  str('displayName', 'The group name', { required: true }),
  attr('members', 'complex', 'The members: users of the organization', {
    multiValued: true,
    subAttributes: [
      str('value', 'The user id', { mutability: 'immutable' }),
      attr('$ref', 'reference', 'The user', { mutability: 'immutable', referenceTypes: ['User'] }),
      str('display', "The user's userName", { mutability: 'readOnly' }),
      str('type', 'User', { mutability: 'immutable', canonicalValues: ['User'] }),
    ],
  }),
];

const eduGroup: Attribute[] = [
  str('type', 'The kind of group', { canonicalValues: ['org-unit', 'class', 'teaching-group', 'other'] }),
  attr('memberRoles', 'complex', "Each member's role in the group (member unless given)", {
    multiValued: true,
    subAttributes: [str('value', 'The user id'), str('role', 'member, student, teacher, ...')],
  }),
];

const common: Attribute[] = [
  str('id', 'The resource id', { mutability: 'readOnly', returned: 'always', caseExact: true, uniqueness: 'server' }),
  str('externalId', "The provisioning client's id of the resource", { caseExact: true }),
];

export interface SchemaDef {
  id: string;
  name: string;
  description: string;
  attributes: Attribute[];
}

export const SCHEMAS: SchemaDef[] = [
  { id: USER, name: 'User', description: 'User Account', attributes: userCore },
  { id: ENTERPRISE, name: 'EnterpriseUser', description: 'Enterprise User', attributes: enterprise },
  {
    id: EDU_USER,
    name: 'EducationUser',
    description: 'Education attributes of a user (eduPerson)',
    attributes: eduUser,
  },
  {
    id: PASSWORD_USER,
    name: 'PasswordUser',
    description: "An existing hash of the user's password, carried over from another system",
    attributes: passwordUser,
  },
  { id: GROUP, name: 'Group', description: 'Group', attributes: groupCore },
  { id: EDU_GROUP, name: 'EducationGroup', description: 'Education attributes of a group', attributes: eduGroup },
];

/** The attributes every resource has besides its schema's (id, externalId; meta is answered, never written). */
export const COMMON_ATTRIBUTES = common;

export interface ResourceKind {
  name: 'User' | 'Group';
  endpoint: string;
  core: string;
  extensions: string[];
}

export const USER_KIND: ResourceKind = {
  name: 'User',
  endpoint: '/Users',
  core: USER,
  extensions: [ENTERPRISE, EDU_USER, PASSWORD_USER],
};
export const GROUP_KIND: ResourceKind = { name: 'Group', endpoint: '/Groups', core: GROUP, extensions: [EDU_GROUP] };

export const schemaById = (id: string) => SCHEMAS.find((s) => s.id.toLowerCase() === id.toLowerCase());
