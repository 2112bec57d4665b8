#!/usr/bin/python3
"""A SAML 2.0 service provider built on Debian's python3-pysaml2 (Saml2Client, xmlsec1 underneath).

Configuration comes as one JSON object in argv[1]:
  port, base (http://127.0.0.1:<port>), entity_id, key, cert (signing key pair, PEM files),
  enc_key, enc_cert (encryption key pair, optional), idp_metadata (file), sign_requests (bool),
  want_assertions_signed, want_response_signed (bool), allow_unsolicited (bool).

Routes:
  GET  /metadata              the SP's metadata
  GET  /login[?binding=post&force=1&passive=1&acr=<class>&relay=<state>]
                              an AuthnRequest to the IdP (HTTP-Redirect unless binding=post)
  POST /acs                   the Response: verified and decrypted by pysaml2; the page shows, and
                              stdout gets one line of, {"event": "acs", ...} with the NameID, the
                              attributes under their names, the AuthnStatement and the issuer
  GET  /logout                a LogoutRequest for the signed-in subject (HTTP-Redirect)
  GET|POST /slo               a LogoutResponse (or an IdP's LogoutRequest: its Redirect binding signature
                              verified with the IdP's metadata keys, then answered)
  GET  /fail-next-logout      the next LogoutRequest from the IdP is answered UnknownPrincipal

Every outcome, refusals included, is a JSON line on stdout ({"event": ..., "error": ...}).
"""
import base64
import html
import re
import json
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.client import Saml2Client
from saml2.config import SPConfig
from saml2.metadata import entity_descriptor
from saml2.saml import NAMEID_FORMAT_UNSPECIFIED
from saml2.samlp import RequestedAuthnContext
from saml2.saml import AuthnContextClassRef
from saml2.sigver import verify_redirect_signature

SHA256 = 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256'
DIGEST_SHA256 = 'http://www.w3.org/2001/04/xmlenc#sha256'

settings = json.loads(sys.argv[1])
base = settings['base']
sp_config = {
    'entityid': settings['entity_id'],
    'key_file': settings['key'],
    'cert_file': settings['cert'],
    'xmlsec_binary': '/usr/bin/xmlsec1',
    'metadata': {'local': [settings['idp_metadata']]},
    'allow_unknown_attributes': True,
    'signing_algorithm': SHA256,
    'digest_algorithm': DIGEST_SHA256,
    'service': {
        'sp': {
            'name': 'pysaml2 test SP',
            'endpoints': {
                'assertion_consumer_service': [(f'{base}/acs', BINDING_HTTP_POST)],
                'single_logout_service': [(f'{base}/slo', BINDING_HTTP_REDIRECT), (f'{base}/slo', BINDING_HTTP_POST)],
            },
            'authn_requests_signed': bool(settings.get('sign_requests')),
            'logout_requests_signed': True,
            'want_assertions_signed': bool(settings.get('want_assertions_signed', True)),
            'want_response_signed': bool(settings.get('want_response_signed', False)),
            'allow_unsolicited': bool(settings.get('allow_unsolicited')),
            'name_id_format': [NAMEID_FORMAT_UNSPECIFIED],
        }
    },
}
if settings.get('enc_key'):
    sp_config['encryption_keypairs'] = [{'key_file': settings['enc_key'], 'cert_file': settings['enc_cert']}]

config = SPConfig()
config.load(sp_config)
client = Saml2Client(config)
idp_entity_id = next(iter(client.metadata.identity_providers()))
outstanding = {}
signed_in = {}  # cookie value -> NameID
failing = {'next_logout': False}


def emit(event):
    print(json.dumps(event), flush=True)


def describe(response):
    """What the SP received, read from what pysaml2 verified (and decrypted)."""
    assertion = response.assertion
    attributes = {}
    friendly = {}
    for statement in assertion.attribute_statement:
        for attribute in statement.attribute:
            attributes[attribute.name] = [v.text for v in attribute.attribute_value]
            if attribute.friendly_name:
                friendly[attribute.name] = attribute.friendly_name
    authn = [
        {
            'class_ref': s.authn_context.authn_context_class_ref.text if s.authn_context.authn_context_class_ref else None,
            'instant': s.authn_instant,
            'session_index': s.session_index,
        }
        for s in assertion.authn_statement
    ]
    name_id = response.name_id
    return {
        'event': 'acs',
        'issuer': response.issuer(),
        'in_response_to': response.in_response_to,
        'name_id': {'format': name_id.format, 'text': name_id.text} if name_id else None,
        'attributes': attributes,
        'friendly_names': friendly,
        'ava': response.ava,
        'authn': authn,
        'audience': [a.text for r in assertion.conditions.audience_restriction for a in r.audience],
        'response_signed': response.response.signature is not None,
        'assertion_signed': assertion.signature is not None,
        'relay_state': None,
    }


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def send(self, status, body, content_type='text/html; charset=utf-8', headers=()):
        data = body.encode('utf-8')
        self.send_response(status)
        self.send_header('content-type', content_type)
        self.send_header('content-length', str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_binding(self, info):
        """What apply_binding made: a redirect (Location header) or an auto-posting form."""
        headers = dict(info.get('headers') or [])
        if 'Location' in headers:
            self.send(303, '', headers=[('location', headers['Location'])])
        else:
            self.send(200, info['data'])

    def show(self, status, event):
        emit(event)
        page = f'<!doctype html><title>{event["event"]}</title><pre id="result">{html.escape(json.dumps(event))}</pre>'
        self.send(status, page)

    def form(self):
        length = int(self.headers.get('content-length') or 0)
        return {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode('utf-8')).items()}

    def cookie(self):
        for part in (self.headers.get('cookie') or '').split(';'):
            name, _, value = part.strip().partition('=')
            if name == 'pysaml2_sp':
                return value
        return None

    def do_GET(self):
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        try:
            if url.path == '/metadata':
                self.send(200, str(entity_descriptor(config)), 'application/samlmetadata+xml')
            elif url.path == '/login':
                self.login(query)
            elif url.path == '/logout':
                self.logout()
            elif url.path == '/slo':
                self.slo(query, BINDING_HTTP_REDIRECT)
            elif url.path == '/fail-next-logout':
                failing['next_logout'] = True
                self.send(200, 'ok', 'text/plain')
            else:
                self.send(404, 'not found', 'text/plain')
        except Exception as err:  # every failure is an answer the test can read
            self.show(400, {'event': url.path.strip('/'), 'error': f'{type(err).__name__}: {err}', 'trace': traceback.format_exc()})

    def do_POST(self):
        url = urlsplit(self.path)
        try:
            form = self.form()
            if url.path == '/acs':
                self.acs(form)
            elif url.path == '/slo':
                self.slo(form, BINDING_HTTP_POST)
            else:
                self.send(404, 'not found', 'text/plain')
        except Exception as err:
            self.show(400, {'event': url.path.strip('/'), 'error': f'{type(err).__name__}: {err}', 'trace': traceback.format_exc()})

    def login(self, query):
        kwargs = {}
        if query.get('force'):
            kwargs['force_authn'] = 'true'
        if query.get('passive'):
            kwargs['is_passive'] = 'true'
        if query.get('acr'):
            kwargs['requested_authn_context'] = RequestedAuthnContext(
                authn_context_class_ref=[AuthnContextClassRef(text=query['acr'])], comparison='exact'
            )
        binding = BINDING_HTTP_POST if query.get('binding') == 'post' else BINDING_HTTP_REDIRECT
        reqid, info = client.prepare_for_authenticate(
            entityid=idp_entity_id,
            relay_state=query.get('relay', '/'),
            binding=binding,
            sign=bool(settings.get('sign_requests')),
            sigalg=SHA256,
            digest_alg=DIGEST_SHA256,
            **kwargs,
        )
        outstanding[reqid] = query.get('relay', '/')
        emit({'event': 'login', 'request_id': reqid, 'binding': binding})
        self.send_binding(info)

    def acs(self, form):
        response = client.parse_authn_request_response(form['SAMLResponse'], BINDING_HTTP_POST, outstanding)
        if response is None:
            raise ValueError('no response')
        event = describe(response)
        event['relay_state'] = form.get('RelayState')
        # what arrived, before pysaml2 replaced the encrypted assertion with its plaintext
        received = base64.b64decode(form['SAMLResponse']).decode('utf-8')
        event['encrypted'] = ':EncryptedAssertion' in received or '<EncryptedAssertion' in received
        event['encryption_methods'] = re.findall(r'EncryptionMethod Algorithm="([^"]+)"', received)
        outstanding.pop(response.in_response_to, None)
        session = response.session_id() or response.assertion.id
        signed_in[session] = response.name_id
        emit(event)
        page = f'<!doctype html><title>acs</title><pre id="result">{html.escape(json.dumps(event))}</pre>'
        self.send(200, page, headers=[('set-cookie', f'pysaml2_sp={session}; Path=/; HttpOnly')])

    def logout(self):
        name_id = signed_in.get(self.cookie())
        if name_id is None:
            raise ValueError('not signed in')
        result = client.global_logout(name_id, sign=True, sign_alg=SHA256, digest_alg=DIGEST_SHA256)
        binding, info = next(iter(result.values()))
        emit({'event': 'logout', 'binding': binding})
        self.send_binding(info)

    def slo(self, params, binding):
        if 'SAMLResponse' in params:
            response = client.parse_logout_request_response(params['SAMLResponse'], binding)
            status = response.response.status.status_code if response else None
            signed_in.pop(self.cookie(), None)
            self.show(200, {
                'event': 'slo-response',
                'status': status.value if status else None,
                'detail': status.status_code.value if status and status.status_code else None,
                'in_response_to': response.response.in_response_to if response else None,
                'issuer': response.issuer() if response else None,
            })
            return
        verified = None
        if binding == BINDING_HTTP_REDIRECT:
            # pysaml2 leaves the Redirect binding's signature to its caller: the IdP's keys from its metadata
            certs = client.metadata.certs(idp_entity_id, 'idpsso', 'signing')
            verified = 'Signature' in params and any(
                verify_redirect_signature(params, client.sec.sec_backend, cert=cert) for cert in certs
            )
            if not verified:
                raise ValueError('the LogoutRequest is not signed by the IdP')
        cookie = self.cookie()
        name_id = signed_in.get(cookie)
        request = client.parse_logout_request(params['SAMLRequest'], binding).message
        fail = failing['next_logout']
        failing['next_logout'] = False
        info = client.handle_logout_request(params['SAMLRequest'], None if fail else name_id, binding, sign=True,
                                            sign_alg=SHA256, digest_alg=DIGEST_SHA256,
                                            relay_state=params.get('RelayState', ''))
        if not fail:
            signed_in.pop(cookie, None)
        emit({
            'event': 'slo-request',
            'known': name_id is not None,
            'matches': name_id is not None and request.name_id == name_id,
            'verified': verified,
            'session_index': [s.text for s in request.session_index],
            'failed': fail,
        })
        self.send_binding(info)


server = ThreadingHTTPServer(('127.0.0.1', settings['port']), Handler)
emit({'event': 'ready', 'url': base, 'idp': idp_entity_id})
server.serve_forever()
