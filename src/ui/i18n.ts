// Page texts in English and Norwegian Bokmål. The locale is the one the user chose with the
// pages' language switcher (a cookie), else ui_locales when the relying party sent one, else
// Accept-Language; English is the fallback.
import Negotiator from 'negotiator';
export type Locale = 'en' | 'nb';

const en = {
  'signin.title': 'Sign in',
  'signin.to': 'to continue to {client}',
  'signin.account': 'to manage your account',
  'signin.passkey': 'Sign in with a passkey',
  'signin.or': 'or use your password',
  'signin.username': 'Username',
  'signin.username_hint': 'For example name@university.example',
  'signin.password': 'Password',
  'signin.submit': 'Sign in',
  'signin.cancel': 'Cancel',
  'signin.no_webauthn': 'This browser cannot use passkeys. Sign in with your password.',
  'error.credentials': 'The username or password is wrong.',
  'error.disabled': 'This account is disabled. Contact your organization’s helpdesk to have it enabled again.',
  'error.passkey': 'Signing in with that passkey did not work. Try again, or use your password.',
  'error.passkey_retry': 'Signing in with that passkey did not work. Try again.',
  'error.password_not_enough': 'A password is not enough for this application: it asks you to sign in with a passkey.',
  'error.passkey_not_enough':
    'This application asks for a stronger passkey than the one you used: one that verifies you with a PIN, fingerprint or face, or a security key your organization has approved.',
  'signin.passkey_required':
    'This application asks for a phishing-resistant sign-in, so a password is not enough here: sign in with a passkey. No passkey yet? Sign in with your password on your account page, add one there, and try again.',
  'error.rate_limited': 'Too many sign-in attempts. Wait a few minutes and try again.',
  'error.busy': 'Too many people are signing in right now, so your password was not checked.',
  'error.busy_advice': 'Wait a moment and try again.',
  'error.unavailable': 'The service cannot reach its data at the moment.',
  'error.csrf': 'This form has expired or was sent from another page. Please try again.',
  'error.expired': 'This sign-in request has expired or was already used. Go back to the application and start again.',
  'error.title': 'Something went wrong',
  'error.generic': 'The request could not be completed.',
  'error.not_found_title': 'Page not found',
  'error.not_found': 'This page does not exist.',
  'error.not_found_advice': 'Check the address, or go to your account.',
  'error.try_later':
    'Try again in a few minutes. If it keeps happening, contact your helpdesk and give them the reference below.',
  'error.reference': 'Reference for the helpdesk: {id}',
  'error.back_home': 'Go to your account',
  'saml.refused_title': 'The application’s sign-in request was refused',
  'saml.refused': 'The application sent a sign-in request this service cannot accept.',
  'saml.refused_advice':
    'Go back to the application and try again. If it happens again, tell the application’s support and give them the reference below.',
  'saml.continue': 'Continue to the application',
  'saml.sending': 'Signing you in to the application…',
  'saml.signing_out': 'Signing you out of the applications…',
  'brand.logo': 'Logo',
  'brand.links': 'Help and policies',
  'brand.support': 'Help',
  'brand.privacy': 'Privacy policy',
  'language.label': 'Language',
  'oauth.invalid_client': 'The application that sent you here is not registered with this sign-in service.',
  'oauth.invalid_redirect_uri':
    'The application asked to send you back to an address it has not registered, so you were not sent there.',
  'oauth.invalid_request': 'The application sent a request this service cannot accept.',
  'oauth.invalid_scope': 'The application asked for information or access it is not allowed to have.',
  'oauth.unauthorized_client': 'The application is not allowed to sign you in this way.',
  'oauth.access_denied': 'The sign-in was cancelled or not allowed.',
  'oauth.login_required': 'You need to sign in before the application can continue.',
  'error.server': 'Something went wrong on our side.',
  'oauth.back_to_application':
    "Go back to the application and try again. If it happens again, contact the application's support and give them the reference below.",
  'oauth.start_again': 'Go back to the application and start again.',
  'consent.title': 'Share information',
  'consent.intro': '{client} wants to use your account ({user}).',
  'consent.receives': 'It will receive:',
  'consent.allow': 'Allow',
  'consent.deny': 'Deny',
  'consent.remembered': 'Your answer is remembered; you will not be asked again for this service.',
  'group.sub': 'A pseudonymous identifier for you',
  'group.userid-idp': 'Your username (eduPersonPrincipalName)',
  'group.userid-nin': 'Your national identity number',
  'group.userid-edugain': 'Your eduGAIN identifier',
  'group.userid-social': 'Identifiers of your linked accounts',
  'group.eidas': 'Your eIDAS identifier',
  'group.email': 'Your email address',
  'group.userinfo-name': 'Your name',
  'group.userinfo-photo': 'Your profile photo',
  'group.userinfo-affiliation': 'Your role at your organization, unit and title',
  'group.userinfo-entitlement': 'Your entitlements',
  'group.userinfo-numbers': 'Your employee or student number',
  'group.groups-org': 'Your organization and organizational units',
  'group.groups-edu': 'Your classes and teaching groups',
  'group.groups-other': 'Your other groups',
  'group.offline_access': 'Access while you are not signed in',
  'account.title': 'Your account',
  'account.signed_in_as': 'Signed in as {user}',
  'account.sign_out': 'Sign out',
  'account.passkeys': 'Passkeys',
  'account.passkeys_intro':
    'A passkey lets you sign in with your fingerprint, face, screen lock or security key instead of a password.',
  'account.no_passkeys': 'You have no passkeys yet.',
  'account.add_passkey': 'Add a passkey',
  'account.label': 'Name',
  'account.authenticator': 'Authenticator',
  'account.created': 'Created',
  'account.last_used': 'Last used',
  'account.never': 'Never',
  'account.rename': 'Rename',
  'account.delete': 'Delete',
  'account.password_works': 'Your password works: you can sign in with it, with or without passkeys.',
  'account.no_password': 'Your account has no password. Sign in with a passkey.',
  'account.unknown_authenticator': 'Unknown authenticator',
  'account.added': 'The passkey was added.',
  'account.renamed': 'The passkey was renamed.',
  'account.deleted': 'The passkey was deleted.',
  'account.add_failed': 'The passkey could not be added. Try again.',
  'account.already_registered': 'This passkey is already registered.',
  'account.bad_label': 'A name must be 1 to 100 characters, without control or invisible formatting characters.',
  'account.reauth': 'To add or delete a passkey, sign in again (your last sign-in was more than 10 minutes ago).',
  'account.passkey_missing': 'That passkey does not exist.',
  'account.confirm_title': 'Delete your last passkey?',
  'account.confirm_text': '"{label}" is your only passkey. After deleting it you sign in with your password.',
  'account.confirm_text_no_password':
    '"{label}" is your only passkey and your account has no password: you will not be able to sign in until your organization helps you.',
  'account.confirm_yes': 'Delete the passkey',
  'account.confirm_no': 'Keep it',
  'password.remove': 'Remove password',
  'password.remove_text':
    'Without a password you sign in with your passkeys only, and nobody can guess or phish a password of yours. If you lose every passkey, your helpdesk can give you a recovery link.',
  'password.remove_confirm_title': 'Remove your password?',
  'password.removed': 'Your password was removed. Sign in with a passkey.',
  'password.remove_needs_passkey': 'Add a passkey before you remove your password.',
  'account.kind': 'Kind',
  'account.kind_synced': 'Synced passkey (backed up to your other devices)',
  'account.kind_device': 'Device-bound (stays on this authenticator)',
  'account.verification': 'Verifies you',
  'account.verification_yes': 'Yes (PIN, fingerprint or face)',
  'account.verification_no': 'No',
  'account.policy_authenticator': 'Your organization does not allow passkeys from this authenticator. Use another one.',
  'account.policy_device_bound':
    'Your organization requires a passkey that stays on one device, such as a security key; synced passkeys are not allowed.',
  'account.policy_user_verification':
    'Your organization requires a passkey that verifies you with a PIN, fingerprint or face.',
  'account.authenticator_compromised':
    'This authenticator model is reported compromised and cannot be used. Use another one.',
  'signals.title': 'Signing you in',
  'signals.text': 'You are signed in.',
  'signals.continue': 'Continue',
  'offer.title': 'Sign in faster next time',
  'offer.text':
    'Create a passkey: next time you sign in with your fingerprint, face or screen lock instead of typing your password.',
  'offer.create': 'Create a passkey',
  'offer.later': 'Not now',
  'offer.failed': 'The passkey was not created. Try again, or continue without one.',
  'recovery.title': 'Register a new passkey',
  'recovery.text': 'This link lets {user} register a new passkey and sign in with it. It works once.',
  'recovery.create': 'Create a passkey',
  'recovery.done': 'Your new passkey is registered. Sign in with it.',
  'recovery.invalid':
    'This recovery link cannot be used: it has expired, has been used, or has been revoked. Ask your helpdesk for a new one.',
  'recovery.failed': 'The passkey was not created. Try again.',
  'upstream.or': 'or sign in with',
  'upstream.failed_title': 'Signing in through {name} did not work',
  'upstream.denied': 'The sign-in at {name} was cancelled or refused.',
  'upstream.unreachable': '{name} could not be reached, so you could not sign in through it.',
  'upstream.timeout': '{name} did not answer in time, so you could not sign in through it.',
  'upstream.invalid': 'The answer from {name} could not be verified, so it was not accepted.',
  'upstream.expired': 'This sign-in through {name} has expired or was already used.',
  'upstream.unknown': 'This sign-in provider is not known here.',
  'upstream.no_account': 'Your account at {name} is not linked to an account here.',
  'upstream.identity_linked_elsewhere': 'Your account at {name} is already linked to another account here.',
  'upstream.account_linked_elsewhere':
    'The account here is already linked to another account at {name}, so this one was not linked to it.',
  'upstream.wrong_organization': 'Your account at {name} is linked to an account of another organization.',
  'upstream.disabled': 'This account is disabled.',
  'upstream.provider_disabled': 'Signing in through {name} is turned off.',
  'upstream.passkey_required':
    'This application asks for a phishing-resistant sign-in: signing in through {name} is not enough here. Sign in with a passkey.',
  'upstream.refused_advice': 'Sign in another way, or contact your helpdesk and give them the reference below.',
  'upstream.back': 'Back to the sign-in',
  'account.links_title': 'Linked sign-in providers',
  'account.links_none': 'No sign-in provider is linked to your account.',
  'account.unlink': 'Unlink {name}',
  'account.unlink_last': 'You cannot unlink this one: it is your only way to sign in. Add a passkey first.',
  'account.link_title': 'Link a sign-in provider',
  'account.link_intro':
    'Sign in at one of these with your own account there, and you can sign in here through it from then on.',
  'account.link': 'Link {name}',
  'account.linked': 'The sign-in provider is linked to your account.',
  'account.linked_as': 'Linked {name} as {as}.',
  'account.linked_provider': 'Linked {name}.',
  'account.reauth_link': 'To link a sign-in provider, sign in again (your last sign-in was more than 10 minutes ago).',
  'account.link_exists': '{name} is already linked to your account.',
  'account.link_failed_title': 'Linking {name} did not work',
  'account.link_identity_elsewhere':
    'Your account at {name} is already linked to another account here, so it was not linked to this one.',
  'account.link_account_elsewhere':
    'Your account here is already linked to another account at {name}. Unlink that one first.',
  'account.link_wrong_organization': '{name} belongs to another organization than your account.',
  'account.link_session':
    'The link was not made: this browser is no longer signed in to the account that asked for it. Sign in and try again.',
  'account.link_expired': 'This link to {name} has expired or was already used.',
  'account.link_not_fresh':
    '{name} did not ask you to sign in again, so the account you are signed in with there was not linked. Sign out at {name}, then try again.',
  'account.link_advice':
    'Nothing was changed. Go back to your account, or contact your helpdesk with the reference below.',
  'lost.link': 'Lost your passkey?',
  'lost.title': 'Lost your passkey?',
  'lost.intro':
    'Give your username or e-mail address. If your organization allows it, we send a link to your e-mail address that lets you register a new passkey.',
  'lost.identifier': 'Username or e-mail address',
  'lost.submit': 'Send me a link',
  'lost.sent':
    'If an account with that name or address exists and may be recovered this way, a link is on its way to its e-mail address. It works once, for an hour. No message? Ask your helpdesk.',
  'password.title': 'Password',
  'password.current': 'Current password',
  'password.new': 'New password',
  'password.rules': 'At least 8 characters.',
  'password.change': 'Change password',
  'password.changed': 'Your password was changed.',
  'password.invalid': 'Give your current password and a new one of at least 8 characters.',
  'password.wrong': 'The current password is wrong. Your password was not changed.',
  'consents.title': 'Applications',
  'consents.intro':
    'These applications may receive information about you. Withdrawing signs you out of the application; it asks again the next time you sign in to it.',
  'consents.none': 'You have not given any application access to information about you.',
  'consents.withdraw': 'Withdraw',
  'consents.withdraw_named': 'Withdraw access for {client}',
  'consents.unknown': 'That application does not have access to your information.',
  'photo.title': 'Profile photo',
  'photo.none': 'You have no profile photo.',
  'photo.alt': 'Your profile photo',
  'photo.intro':
    'Applications you allow to see your photo get it as a JPEG of {edge} pixels on the longest edge. JPEG, PNG, WebP, GIF or AVIF, at most {mib} MiB and {mp} megapixels.',
  'photo.file': 'Image',
  'photo.upload': 'Upload photo',
  'photo.replace': 'Replace photo',
  'photo.remove': 'Remove photo',
  'photo.unreadable': 'The upload could not be read. Send the form again.',
  'photo.choose': 'Choose an image file to upload.',
  'photo.bad_image':
    'The file could not be used as a photo. Use a JPEG, PNG, WebP, GIF or AVIF image of at most {mib} MiB and {mp} megapixels.',
  'photo.rate_limited': 'Too many photo uploads. Try again later.',
  'logout.title': 'Sign out',
  'logout.question': 'Do you want to sign out?',
  'logout.yes': 'Sign out',
  'logout.no': 'Stay signed in',
  'logout.done_title': 'Signed out',
  'logout.done': 'You are signed out.',
  'logout.sign_in_again': 'Sign in again',
  'logout.stayed_title': 'Still signed in',
  'logout.stayed': 'You are still signed in.',
  'logout.continue': 'Continue',
  'js.working': 'Waiting for your passkey…',
  'js.cancelled': 'The passkey request was cancelled or timed out.',
  'device.title': 'Sign in on a device',
  'device.intro': 'Enter the code your device shows (a TV, a console, a command-line tool).',
  'device.code': 'Code',
  'device.code_hint': 'Eight letters, for example BCDF-GHJK. Upper or lower case, with or without the dash.',
  'device.continue': 'Continue',
  'device.wrong_code': 'That code is not valid. Check the code on your device and try again.',
  'device.expired_code': 'That code has expired. Start the sign-in again on your device to get a new code.',
  'device.used_code': 'That code has already been used. Start the sign-in again on your device to get a new code.',
  'device.no_code': 'Enter the code your device shows.',
  'device.cancelled': 'The sign-in was cancelled. Your device was not signed in.',
  'device.failed': 'The sign-in on your device could not be completed.',
  'device.rate_limited': 'Too many wrong codes from your network. Wait a few minutes and try again.',
  'device.confirm_title': 'Sign in on your device?',
  'device.confirm_question': 'Sign in to {client} on your device?',
  'device.confirm_check': 'Continue only if your device shows this code:',
  'device.confirm_warning':
    'If you did not start this sign-in yourself, cancel: someone may be trying to get into your account.',
  'device.confirm_yes': 'Yes, sign in',
  'device.confirm_no': 'Cancel',
  'device.done_title': 'Device signed in',
  'device.done': 'You are signed in to {client} on your device. You can close this window.',
} as const;

export type MessageKey = keyof typeof en;

const nb: Record<MessageKey, string> = {
  'signin.title': 'Logg inn',
  'signin.to': 'for å fortsette til {client}',
  'signin.account': 'for å administrere kontoen din',
  'signin.passkey': 'Logg inn med passnøkkel',
  'signin.or': 'eller bruk passordet ditt',
  'signin.username': 'Brukernavn',
  'signin.username_hint': 'For eksempel navn@universitet.example',
  'signin.password': 'Passord',
  'signin.submit': 'Logg inn',
  'signin.cancel': 'Avbryt',
  'signin.no_webauthn': 'Denne nettleseren kan ikke bruke passnøkler. Logg inn med passordet ditt.',
  'error.credentials': 'Brukernavnet eller passordet er feil.',
  'error.disabled':
    'Denne kontoen er deaktivert. Kontakt brukerstøtten i organisasjonen din for å få den aktivert igjen.',
  'error.passkey': 'Innloggingen med passnøkkelen virket ikke. Prøv igjen, eller bruk passordet ditt.',
  'error.passkey_retry': 'Innloggingen med passnøkkelen virket ikke. Prøv igjen.',
  'error.password_not_enough': 'Passord er ikke nok for denne tjenesten: den ber deg logge inn med passnøkkel.',
  'error.passkey_not_enough':
    'Denne tjenesten ber om en sterkere passnøkkel enn den du brukte: en som bekrefter deg med PIN-kode, fingeravtrykk eller ansikt, eller en sikkerhetsnøkkel organisasjonen din har godkjent.',
  'signin.passkey_required':
    'Denne tjenesten krever en phishing-sikker innlogging, så passord er ikke nok her: logg inn med passnøkkel. Har du ingen passnøkkel ennå? Logg inn med passordet ditt på kontosiden, legg til en passnøkkel der, og prøv igjen.',
  'error.rate_limited': 'For mange innloggingsforsøk. Vent noen minutter og prøv igjen.',
  'error.busy': 'Akkurat nå logger for mange seg inn, så passordet ditt ble ikke sjekket.',
  'error.busy_advice': 'Vent litt og prøv igjen.',
  'error.unavailable': 'Tjenesten får ikke tak i dataene sine akkurat nå.',
  'error.csrf': 'Skjemaet er utløpt eller ble sendt fra en annen side. Prøv igjen.',
  'error.expired':
    'Innloggingsforespørselen er utløpt eller allerede brukt. Gå tilbake til tjenesten og start på nytt.',
  'error.title': 'Noe gikk galt',
  'error.generic': 'Forespørselen kunne ikke fullføres.',
  'error.not_found_title': 'Fant ikke siden',
  'error.not_found': 'Denne siden finnes ikke.',
  'error.not_found_advice': 'Sjekk adressen, eller gå til kontoen din.',
  'error.try_later':
    'Prøv igjen om noen minutter. Skjer det igjen, kontakt brukerstøtten og oppgi referansen nedenfor.',
  'error.reference': 'Referanse for brukerstøtten: {id}',
  'error.back_home': 'Gå til kontoen din',
  'saml.refused_title': 'Innloggingsforespørselen fra tjenesten ble avvist',
  'saml.refused': 'Tjenesten sendte en innloggingsforespørsel som denne tjenesten ikke kan godta.',
  'saml.refused_advice':
    'Gå tilbake til tjenesten og prøv igjen. Skjer det igjen, si fra til tjenestens brukerstøtte og oppgi referansen nedenfor.',
  'saml.continue': 'Fortsett til tjenesten',
  'saml.sending': 'Logger deg inn i tjenesten …',
  'saml.signing_out': 'Logger deg ut av tjenestene …',
  'brand.logo': 'Logo',
  'brand.links': 'Hjelp og retningslinjer',
  'brand.support': 'Hjelp',
  'brand.privacy': 'Personvernerklæring',
  'language.label': 'Språk',
  'oauth.invalid_client': 'Tjenesten som sendte deg hit, er ikke registrert i denne innloggingstjenesten.',
  'oauth.invalid_redirect_uri':
    'Tjenesten ba om å sende deg tilbake til en adresse den ikke har registrert, så du ble ikke sendt dit.',
  'oauth.invalid_request': 'Tjenesten sendte en forespørsel som ikke kan tas imot.',
  'oauth.invalid_scope': 'Tjenesten ba om opplysninger eller tilgang den ikke har lov til å få.',
  'oauth.unauthorized_client': 'Tjenesten har ikke lov til å logge deg inn på denne måten.',
  'oauth.access_denied': 'Innloggingen ble avbrutt eller ikke tillatt.',
  'oauth.login_required': 'Du må logge inn før tjenesten kan fortsette.',
  'error.server': 'Noe gikk galt hos oss.',
  'oauth.back_to_application':
    'Gå tilbake til tjenesten og prøv igjen. Skjer det igjen, kontakt brukerstøtten for tjenesten og oppgi referansen nedenfor.',
  'oauth.start_again': 'Gå tilbake til tjenesten og start på nytt.',
  'consent.title': 'Del informasjon',
  'consent.intro': '{client} ønsker å bruke kontoen din ({user}).',
  'consent.receives': 'Tjenesten får:',
  'consent.allow': 'Tillat',
  'consent.deny': 'Avslå',
  'consent.remembered': 'Svaret ditt huskes; du blir ikke spurt igjen for denne tjenesten.',
  'group.sub': 'En pseudonym identifikator for deg',
  'group.userid-idp': 'Brukernavnet ditt (eduPersonPrincipalName)',
  'group.userid-nin': 'Fødselsnummeret ditt',
  'group.userid-edugain': 'eduGAIN-identifikatoren din',
  'group.userid-social': 'Identifikatorer for tilknyttede kontoer',
  'group.eidas': 'eIDAS-identifikatoren din',
  'group.email': 'E-postadressen din',
  'group.userinfo-name': 'Navnet ditt',
  'group.userinfo-photo': 'Profilbildet ditt',
  'group.userinfo-affiliation': 'Rollen din ved organisasjonen, enhet og tittel',
  'group.userinfo-entitlement': 'Rettighetene dine (entitlements)',
  'group.userinfo-numbers': 'Ansatt- eller studentnummeret ditt',
  'group.groups-org': 'Organisasjonen og enhetene du hører til',
  'group.groups-edu': 'Klassene og undervisningsgruppene dine',
  'group.groups-other': 'De andre gruppene dine',
  'group.offline_access': 'Tilgang mens du ikke er logget inn',
  'account.title': 'Kontoen din',
  'account.signed_in_as': 'Logget inn som {user}',
  'account.sign_out': 'Logg ut',
  'account.passkeys': 'Passnøkler',
  'account.passkeys_intro':
    'Med en passnøkkel logger du inn med fingeravtrykk, ansikt, skjermlås eller sikkerhetsnøkkel i stedet for passord.',
  'account.no_passkeys': 'Du har ingen passnøkler ennå.',
  'account.add_passkey': 'Legg til passnøkkel',
  'account.label': 'Navn',
  'account.authenticator': 'Autentisator',
  'account.created': 'Opprettet',
  'account.last_used': 'Sist brukt',
  'account.never': 'Aldri',
  'account.rename': 'Gi nytt navn',
  'account.delete': 'Slett',
  'account.password_works': 'Passordet ditt virker: du kan logge inn med det, med eller uten passnøkler.',
  'account.no_password': 'Kontoen din har ikke passord. Logg inn med en passnøkkel.',
  'account.unknown_authenticator': 'Ukjent autentisator',
  'account.added': 'Passnøkkelen ble lagt til.',
  'account.renamed': 'Passnøkkelen fikk nytt navn.',
  'account.deleted': 'Passnøkkelen ble slettet.',
  'account.add_failed': 'Passnøkkelen kunne ikke legges til. Prøv igjen.',
  'account.already_registered': 'Denne passnøkkelen er allerede registrert.',
  'account.bad_label': 'Navnet må ha 1 til 100 tegn, uten kontrolltegn eller usynlige formateringstegn.',
  'account.reauth':
    'Logg inn på nytt for å legge til eller slette en passnøkkel (forrige innlogging var for mer enn 10 minutter siden).',
  'account.passkey_missing': 'Den passnøkkelen finnes ikke.',
  'account.confirm_title': 'Slette den siste passnøkkelen?',
  'account.confirm_text':
    '«{label}» er den eneste passnøkkelen din. Etter slettingen logger du inn med passordet ditt.',
  'account.confirm_text_no_password':
    '«{label}» er den eneste passnøkkelen din, og kontoen har ikke passord: du kan ikke logge inn før organisasjonen din hjelper deg.',
  'account.confirm_yes': 'Slett passnøkkelen',
  'account.confirm_no': 'Behold den',
  'password.remove': 'Fjern passordet',
  'password.remove_text':
    'Uten passord logger du inn bare med passnøklene dine, og ingen kan gjette eller fiske passordet ditt. Mister du alle passnøklene, kan brukerstøtten gi deg en gjenopprettingslenke.',
  'password.remove_confirm_title': 'Fjerne passordet ditt?',
  'password.removed': 'Passordet ditt ble fjernet. Logg inn med en passnøkkel.',
  'password.remove_needs_passkey': 'Legg til en passnøkkel før du fjerner passordet.',
  'account.kind': 'Type',
  'account.kind_synced': 'Synkronisert passnøkkel (sikkerhetskopiert til de andre enhetene dine)',
  'account.kind_device': 'Enhetsbundet (blir på denne autentisatoren)',
  'account.verification': 'Bekrefter deg',
  'account.verification_yes': 'Ja (PIN-kode, fingeravtrykk eller ansikt)',
  'account.verification_no': 'Nei',
  'account.policy_authenticator':
    'Organisasjonen din tillater ikke passnøkler fra denne autentisatoren. Bruk en annen.',
  'account.policy_device_bound':
    'Organisasjonen din krever en passnøkkel som blir på én enhet, for eksempel en sikkerhetsnøkkel; synkroniserte passnøkler er ikke tillatt.',
  'account.policy_user_verification':
    'Organisasjonen din krever en passnøkkel som bekrefter deg med PIN-kode, fingeravtrykk eller ansikt.',
  'account.authenticator_compromised':
    'Denne autentisatormodellen er meldt kompromittert og kan ikke brukes. Bruk en annen.',
  'signals.title': 'Logger deg inn',
  'signals.text': 'Du er logget inn.',
  'signals.continue': 'Fortsett',
  'offer.title': 'Logg inn raskere neste gang',
  'offer.text':
    'Opprett en passnøkkel: neste gang logger du inn med fingeravtrykk, ansikt eller skjermlås i stedet for å skrive passordet.',
  'offer.create': 'Opprett en passnøkkel',
  'offer.later': 'Ikke nå',
  'offer.failed': 'Passnøkkelen ble ikke opprettet. Prøv igjen, eller fortsett uten.',
  'recovery.title': 'Registrer en ny passnøkkel',
  'recovery.text': 'Denne lenken lar {user} registrere en ny passnøkkel og logge inn med den. Den virker én gang.',
  'recovery.create': 'Opprett en passnøkkel',
  'recovery.done': 'Den nye passnøkkelen din er registrert. Logg inn med den.',
  'recovery.invalid':
    'Denne gjenopprettingslenken kan ikke brukes: den er utløpt, brukt eller trukket tilbake. Be brukerstøtten om en ny.',
  'recovery.failed': 'Passnøkkelen ble ikke opprettet. Prøv igjen.',
  'upstream.or': 'eller logg inn med',
  'upstream.failed_title': 'Innlogging via {name} mislyktes',
  'upstream.denied': 'Innloggingen hos {name} ble avbrutt eller avvist.',
  'upstream.unreachable': 'Fikk ikke kontakt med {name}, så du kunne ikke logge inn via den.',
  'upstream.timeout': '{name} svarte ikke i tide, så du kunne ikke logge inn via den.',
  'upstream.invalid': 'Svaret fra {name} kunne ikke verifiseres og ble ikke godtatt.',
  'upstream.expired': 'Denne innloggingen via {name} er utløpt eller allerede brukt.',
  'upstream.unknown': 'Denne innloggingstjenesten er ikke kjent her.',
  'upstream.no_account': 'Kontoen din hos {name} er ikke koblet til en konto her.',
  'upstream.identity_linked_elsewhere': 'Kontoen din hos {name} er allerede koblet til en annen konto her.',
  'upstream.account_linked_elsewhere':
    'Kontoen her er allerede koblet til en annen konto hos {name}, så denne ble ikke koblet til den.',
  'upstream.wrong_organization': 'Kontoen din hos {name} er koblet til en konto i en annen organisasjon.',
  'upstream.disabled': 'Denne kontoen er deaktivert.',
  'upstream.provider_disabled': 'Innlogging via {name} er slått av.',
  'upstream.passkey_required':
    'Denne applikasjonen krever en phishing-sikker innlogging: innlogging via {name} er ikke nok her. Logg inn med en passnøkkel.',
  'upstream.refused_advice': 'Logg inn på en annen måte, eller kontakt brukerstøtten og oppgi referansen nedenfor.',
  'upstream.back': 'Tilbake til innloggingen',
  'account.links_title': 'Koblede innloggingstjenester',
  'account.links_none': 'Ingen innloggingstjeneste er koblet til kontoen din.',
  'account.unlink': 'Fjern koblingen til {name}',
  'account.unlink_last':
    'Du kan ikke fjerne denne: den er din eneste måte å logge inn på. Legg til en passnøkkel først.',
  'account.link_title': 'Koble til en innloggingstjeneste',
  'account.link_intro': 'Logg inn hos en av disse med din egen konto der, så kan du logge inn her via den fra nå av.',
  'account.link': 'Koble til {name}',
  'account.linked': 'Innloggingstjenesten er koblet til kontoen din.',
  'account.linked_as': 'Koblet til {name} som {as}.',
  'account.linked_provider': 'Koblet til {name}.',
  'account.reauth_link':
    'Logg inn på nytt for å koble til en innloggingstjeneste (forrige innlogging var for mer enn 10 minutter siden).',
  'account.link_exists': '{name} er allerede koblet til kontoen din.',
  'account.link_failed_title': 'Tilkoblingen av {name} mislyktes',
  'account.link_identity_elsewhere':
    'Kontoen din hos {name} er allerede koblet til en annen konto her, så den ble ikke koblet til denne.',
  'account.link_account_elsewhere':
    'Kontoen din her er allerede koblet til en annen konto hos {name}. Fjern den koblingen først.',
  'account.link_wrong_organization': '{name} tilhører en annen organisasjon enn kontoen din.',
  'account.link_session':
    'Koblingen ble ikke laget: denne nettleseren er ikke lenger logget inn på kontoen som ba om den. Logg inn og prøv igjen.',
  'account.link_expired': 'Denne tilkoblingen av {name} er utløpt eller allerede brukt.',
  'account.link_not_fresh':
    '{name} ba deg ikke logge inn på nytt, så kontoen du er logget inn med der, ble ikke koblet til. Logg ut hos {name} og prøv igjen.',
  'account.link_advice':
    'Ingenting ble endret. Gå tilbake til kontoen din, eller kontakt brukerstøtten og oppgi referansen nedenfor.',
  'lost.link': 'Mistet passnøkkelen?',
  'lost.title': 'Mistet passnøkkelen?',
  'lost.intro':
    'Oppgi brukernavnet eller e-postadressen din. Tillater organisasjonen din det, sender vi en lenke til e-postadressen din som lar deg registrere en ny passnøkkel.',
  'lost.identifier': 'Brukernavn eller e-postadresse',
  'lost.submit': 'Send meg en lenke',
  'lost.sent':
    'Finnes det en konto med det navnet eller den adressen som kan gjenopprettes slik, er en lenke på vei til e-postadressen dens. Den virker én gang, i en time. Ingen melding? Spør brukerstøtten.',
  'password.title': 'Passord',
  'password.current': 'Nåværende passord',
  'password.new': 'Nytt passord',
  'password.rules': 'Minst 8 tegn.',
  'password.change': 'Bytt passord',
  'password.changed': 'Passordet ditt ble byttet.',
  'password.invalid': 'Oppgi det nåværende passordet og et nytt på minst 8 tegn.',
  'password.wrong': 'Det nåværende passordet er feil. Passordet ble ikke byttet.',
  'consents.title': 'Tjenester',
  'consents.intro':
    'Disse tjenestene kan få informasjon om deg. Trekker du tilgangen tilbake, blir du logget ut av tjenesten, og den spør igjen neste gang du logger inn.',
  'consents.none': 'Du har ikke gitt noen tjeneste tilgang til informasjon om deg.',
  'consents.withdraw': 'Trekk tilbake',
  'consents.withdraw_named': 'Trekk tilbake tilgangen for {client}',
  'consents.unknown': 'Den tjenesten har ikke tilgang til informasjonen din.',
  'photo.title': 'Profilbilde',
  'photo.none': 'Du har ikke noe profilbilde.',
  'photo.alt': 'Profilbildet ditt',
  'photo.intro':
    'Tjenester du lar se bildet ditt, får det som JPEG med {edge} piksler på den lengste siden. JPEG, PNG, WebP, GIF eller AVIF, høyst {mib} MiB og {mp} megapiksler.',
  'photo.file': 'Bilde',
  'photo.upload': 'Last opp bilde',
  'photo.replace': 'Bytt bilde',
  'photo.remove': 'Fjern bilde',
  'photo.unreadable': 'Opplastingen kunne ikke leses. Send skjemaet på nytt.',
  'photo.choose': 'Velg en bildefil å laste opp.',
  'photo.bad_image':
    'Filen kunne ikke brukes som bilde. Bruk et JPEG-, PNG-, WebP-, GIF- eller AVIF-bilde på høyst {mib} MiB og {mp} megapiksler.',
  'photo.rate_limited': 'For mange bildeopplastinger. Prøv igjen senere.',
  'logout.title': 'Logg ut',
  'logout.question': 'Vil du logge ut?',
  'logout.yes': 'Logg ut',
  'logout.no': 'Forbli innlogget',
  'logout.done_title': 'Logget ut',
  'logout.done': 'Du er logget ut.',
  'logout.sign_in_again': 'Logg inn igjen',
  'logout.stayed_title': 'Fortsatt innlogget',
  'logout.stayed': 'Du er fortsatt logget inn.',
  'logout.continue': 'Fortsett',
  'js.working': 'Venter på passnøkkelen…',
  'js.cancelled': 'Passnøkkelforespørselen ble avbrutt eller tidsavbrutt.',
  'device.title': 'Logg inn på en enhet',
  'device.intro': 'Skriv inn koden enheten din viser (en TV, en spillkonsoll, et kommandolinjeverktøy).',
  'device.code': 'Kode',
  'device.code_hint': 'Åtte bokstaver, for eksempel BCDF-GHJK. Store eller små bokstaver, med eller uten bindestrek.',
  'device.continue': 'Fortsett',
  'device.wrong_code': 'Koden er ikke gyldig. Sjekk koden på enheten og prøv igjen.',
  'device.expired_code': 'Koden er utløpt. Start innloggingen på nytt på enheten for å få en ny kode.',
  'device.used_code': 'Koden er allerede brukt. Start innloggingen på nytt på enheten for å få en ny kode.',
  'device.no_code': 'Skriv inn koden enheten din viser.',
  'device.cancelled': 'Innloggingen ble avbrutt. Enheten din ble ikke logget inn.',
  'device.failed': 'Innloggingen på enheten kunne ikke fullføres.',
  'device.rate_limited': 'For mange feil koder fra nettverket ditt. Vent noen minutter og prøv igjen.',
  'device.confirm_title': 'Logge inn på enheten?',
  'device.confirm_question': 'Logge inn i {client} på enheten din?',
  'device.confirm_check': 'Fortsett bare hvis enheten viser denne koden:',
  'device.confirm_warning':
    'Hvis du ikke startet denne innloggingen selv, avbryt: noen kan prøve å komme inn på kontoen din.',
  'device.confirm_yes': 'Ja, logg inn',
  'device.confirm_no': 'Avbryt',
  'device.done_title': 'Enheten er logget inn',
  'device.done': 'Du er logget inn i {client} på enheten din. Du kan lukke dette vinduet.',
};

const TABLES: Record<Locale, Record<MessageKey, string>> = { en, nb };

export type Translate = (key: MessageKey, vars?: Record<string, string>) => string;

/** A text with its {placeholders} filled in. */
export function fill(text: string, vars: Record<string, string | number>): string {
  return text.replace(/\{(\w+)\}/g, (_, name: string) => String(vars[name] ?? ''));
}

export function translator(locale: Locale): Translate {
  const table = TABLES[locale];
  return (key, vars = {}) => fill(table[key], vars);
}

function supported(tag: string): Locale | undefined {
  const primary = tag.trim().toLowerCase().split('-')[0];
  if (primary === 'en') return 'en';
  if (primary === 'nb' || primary === 'no' || primary === 'nn') return 'nb';
  return undefined;
}

export const LOCALES: { locale: Locale; name: string }[] = [
  { locale: 'en', name: 'English' },
  { locale: 'nb', name: 'Norsk bokmål' },
];

/** The cookie the language switcher sets. */
export const LANGUAGE_COOKIE = 'lang';

export const isLocale = (value: unknown): value is Locale => value === 'en' || value === 'nb';

/** The language the user chose with the switcher, from a Cookie header. */
export function chosenLocale(cookieHeader: unknown): Locale | undefined {
  if (typeof cookieHeader !== 'string') return undefined;
  const m = new RegExp(`(?:^|;\\s*)${LANGUAGE_COOKIE}=([a-z]{2})(?:;|$)`).exec(cookieHeader);
  return m && isLocale(m[1]) ? m[1] : undefined;
}

/**
 * The user's own choice (the switcher's cookie) wins, then ui_locales (space-separated, in
 * preference order), then Accept-Language (q-weighted).
 */
export function pickLocale(uiLocales: unknown, acceptLanguage: unknown, chosen?: Locale): Locale {
  if (chosen) return chosen;
  if (typeof uiLocales === 'string') {
    for (const tag of uiLocales.split(' ')) {
      const l = supported(tag);
      if (l) return l;
    }
  }
  if (typeof acceptLanguage === 'string') {
    // The first 20 entries are plenty; a longer header is not worth parsing.
    const header = acceptLanguage.split(',').slice(0, 20).join(',');
    // Without a list of offers, negotiator ranks every language the browser accepts (q > 0) by
    // q, ties in the browser's order; the first one that maps to a catalog wins.
    for (const tag of new Negotiator({ headers: { 'accept-language': header } }).languages()) {
      const l = supported(tag);
      if (l) return l;
    }
  }
  return 'en';
}

// Built once per locale, on first use: a page formats two times per passkey, and a DateTimeFormat is
// costly to build (and the first one reads several megabytes of ICU data, which a service answering
// only APIs never needs).
const TIME_TAGS: Record<Locale, string> = { en: 'en-GB', nb: 'nb-NO' };
const timeFormats: Partial<Record<Locale, Intl.DateTimeFormat>> = {};

export function formatTime(ms: number | null, locale: Locale): string | undefined {
  if (ms === null) return undefined;
  const format = (timeFormats[locale] ??= new Intl.DateTimeFormat(TIME_TAGS[locale], {
    dateStyle: 'medium',
    timeStyle: 'short',
    timeZone: 'UTC',
  }));
  return `${format.format(new Date(ms))} UTC`;
}
