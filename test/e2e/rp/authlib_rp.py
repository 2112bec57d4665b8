#!/usr/bin/python3
"""A relying party built on Debian's python3-authlib and python3-requests.

login: discovers the provider, serves its redirect URI on 127.0.0.1, prints the authorization URL
(code flow, PKCE S256, state, nonce) as one JSON line, and waits for the browser to come back. It
then exchanges the code with client_secret_basic (or, given no secret, as a public client), validates the ID token against the JWKS (iss,
aud, exp, nonce, at_hash), fetches userinfo, introspects the access token, and refreshes once when
a refresh token came (then tries the old one again); the result is the last JSON line on stdout.

api: a client_credentials token through OAuth2Session, used on the passkey API of one organization.

Configuration comes as one JSON object in argv[2]. Any failure exits non-zero with the reason on stderr.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import urlsplit

import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from authlib.oidc.core import CodeIDToken
from authlib.oidc.discovery import OpenIDProviderMetadata, get_well_known_url


def discover(issuer):
    res = requests.get(get_well_known_url(issuer, external=True), timeout=10)
    res.raise_for_status()
    metadata = OpenIDProviderMetadata(res.json())
    metadata.validate()
    if metadata['issuer'] != issuer:
        raise ValueError(f"discovery names issuer {metadata['issuer']}, expected {issuer}")
    return metadata


def validate_id_token(metadata, id_token, client_id, nonce, access_token):
    jwks = requests.get(metadata['jwks_uri'], timeout=10)
    jwks.raise_for_status()
    claims = jwt.decode(
        id_token,
        JsonWebKey.import_key_set(jwks.json()),
        claims_cls=CodeIDToken,
        claims_options={
            'iss': {'essential': True, 'value': metadata['issuer']},
            'aud': {'essential': True, 'value': client_id},
        },
        claims_params={'nonce': nonce, 'client_id': client_id, 'access_token': access_token},
    )
    claims.validate(leeway=5)
    return dict(claims), claims.header


def follow_up(session, metadata, token):
    """Introspection of the access token, when the provider offers it; a refresh, when a refresh token came."""
    found = {}
    if 'introspection_endpoint' in metadata and session.client_secret:
        res = session.introspect_token(
            metadata['introspection_endpoint'], token=token['access_token'], token_type_hint='access_token'
        )
        res.raise_for_status()
        found['introspection'] = res.json()
    if token.get('refresh_token'):
        old = token['refresh_token']
        fresh = session.refresh_token(metadata['token_endpoint'], refresh_token=old)
        found['refreshed'] = {
            'rotated': fresh.get('refresh_token') not in (None, old),
            'scope': fresh.get('scope'),
            'access_token_works': session.get(metadata['userinfo_endpoint'], timeout=10).status_code == 200,
        }
        data = {'grant_type': 'refresh_token', 'refresh_token': old}
        if not session.client_secret:
            data['client_id'] = session.client_id
        reused = session.post(
            metadata['token_endpoint'],
            data=data,
            auth=(session.client_id, session.client_secret) if session.client_secret else None,
            withhold_token=True,
            timeout=10,
        )
        found['reused_refresh_token'] = {'status': reused.status_code, 'error': reused.json().get('error')}
    return found


class CallbackServer(HTTPServer):
    def handle_timeout(self):
        raise TimeoutError('the browser did not come back to the redirect URI')


def login(cfg):
    metadata = discover(cfg['issuer'])
    # Without a secret this is a public client: PKCE alone binds the code to this relying party.
    secret = cfg.get('client_secret')
    session = OAuth2Session(
        cfg['client_id'],
        secret,
        scope=cfg.get('scope', 'openid profile email'),
        redirect_uri=cfg['redirect_uri'],
        code_challenge_method='S256',
        token_endpoint_auth_method='client_secret_basic' if secret else 'none',
    )
    code_verifier = generate_token(64)
    nonce = generate_token(32)
    url, state = session.create_authorization_url(
        metadata['authorization_endpoint'],
        code_verifier=code_verifier,
        nonce=nonce,
        **({'prompt': cfg['prompt']} if 'prompt' in cfg else {}),
    )
    result = {}
    parts = urlsplit(cfg['redirect_uri'])

    class Callback(BaseHTTPRequestHandler):
        def do_GET(self):
            if urlsplit(self.path).path != urlsplit(cfg['redirect_uri']).path:
                self.send_error(404)
                return
            try:
                token = session.fetch_token(
                    metadata['token_endpoint'],
                    authorization_response=f'{parts.scheme}://{parts.netloc}{self.path}',
                    state=state,
                    code_verifier=code_verifier,
                )
                claims, header = validate_id_token(
                    metadata, token['id_token'], cfg['client_id'], nonce, token['access_token']
                )
                userinfo = session.get(metadata['userinfo_endpoint'], timeout=10)
                userinfo.raise_for_status()
                result.update(
                    id_token=claims,
                    id_token_alg=header['alg'],
                    userinfo=userinfo.json(),
                    scope=token.get('scope'),
                    token_type=token.get('token_type'),
                )
                result.update(follow_up(session, metadata, token))
                body = f"<!doctype html><title>Signed in</title><p id=rp>signed in as {claims['sub']}</p>"
                self.send_response(200)
            except Exception as error:  # reported on stderr and in the page; the exit code says it failed
                result['error'] = f'{type(error).__name__}: {error}'
                body = '<!doctype html><title>Failed</title><p id=rp>sign-in failed</p>'
                self.send_response(500)
            self.send_header('content-type', 'text/html; charset=utf-8')
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = CallbackServer((parts.hostname, parts.port), Callback)
    server.timeout = cfg.get('timeout', 60)
    print(json.dumps({'authorization_url': url}), flush=True)
    try:
        while not result:  # other requests (a favicon) do not end the wait
            server.handle_request()
    finally:
        server.server_close()
    if 'error' in result:
        raise RuntimeError(result['error'])
    print(json.dumps(result), flush=True)


def api(cfg):
    metadata = discover(cfg['issuer'])
    session = OAuth2Session(
        cfg['client_id'],
        cfg['client_secret'],
        scope=cfg['scope'],
        token_endpoint_auth_method='client_secret_basic',
    )
    token = session.fetch_token(metadata['token_endpoint'], grant_type='client_credentials')
    res = session.get(f"{cfg['issuer']}/2/passkey/{cfg['org']}", timeout=10)
    print(
        json.dumps(
            {
                'token_type': token.get('token_type'),
                'scope': token.get('scope'),
                'expires_in': token.get('expires_in'),
                'status': res.status_code,
                'body': res.json(),
            }
        ),
        flush=True,
    )


if __name__ == '__main__':
    try:
        {'login': login, 'api': api}[sys.argv[1]](json.loads(sys.argv[2]))
    except Exception as error:
        print(f'authlib relying party: {type(error).__name__}: {error}', file=sys.stderr)
        sys.exit(1)
