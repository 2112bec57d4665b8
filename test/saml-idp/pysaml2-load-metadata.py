# Loads the identity provider's metadata as a pysaml2 service provider does, checking its signature
# with xmlsec1 against the given certificate, and prints what pysaml2 read from it as JSON.
# Usage: python3 pysaml2-load-metadata.py <metadata.xml> <metadata-signing-cert.pem>
import json
import sys

from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.attribute_converter import ac_factory
from saml2.config import SPConfig
from saml2.mdstore import MetadataStore, MetaDataFile
from saml2.sigver import security_context

metadata_file, certificate = sys.argv[1], sys.argv[2]
config = SPConfig()
config.load({"entityid": "http://localhost/sp.xml", "xmlsec_binary": "/usr/bin/xmlsec1"})
metadata = MetaDataFile(
    ac_factory(),
    metadata_file,
    cert=certificate,
    security=security_context(config),
    node_name="urn:oasis:names:tc:SAML:2.0:metadata:EntityDescriptor",
)
metadata.load()
store = MetadataStore(ac_factory(), config)
store.metadata[metadata_file] = metadata
entity_id = list(metadata.keys())[0]
print(
    json.dumps(
        {
            "entity_id": entity_id,
            "sso_redirect": [s["location"] for s in store.single_sign_on_service(entity_id, BINDING_HTTP_REDIRECT)],
            "sso_post": [s["location"] for s in store.single_sign_on_service(entity_id, BINDING_HTTP_POST)],
            "slo_redirect": [s["location"] for s in store.single_logout_service(entity_id, BINDING_HTTP_REDIRECT, "idpsso")],
            "signing_certificates": len(store.certs(entity_id, "idpsso", "signing")),
            "encryption_certificates": len(store.certs(entity_id, "idpsso", "encryption")),
        }
    )
)
