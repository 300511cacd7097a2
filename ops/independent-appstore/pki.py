"""The independent server's keys and certificates: its own PKI (root, intermediate with Apple's
WWDR OID, leaf with the receipt-signing OID) that signs every JWS, a private CA for HTTPS, and
the In-App Purchase key churnwatch signs its request JWTs with (and the server checks them by)."""
from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import os
import ssl
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from cryptography.x509.oid import NameOID

OID_INTERMEDIATE = "1.2.840.113635.100.6.2.1"
OID_LEAF = "1.2.840.113635.100.6.11.1"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# --------------------------------------------------------------------------------------------
# PKI: root CA -> intermediate (Apple WWDR OID) -> leaf (receipt-signing OID), all P-256.
# --------------------------------------------------------------------------------------------
class PKI:
    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        # Valid long before and after any simulated night: churnwatch validates the chain at the
        # payload's signedDate (no online checks), which is simulated time.
        not_before = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
        not_after = dt.datetime(2040, 1, 1, tzinfo=dt.timezone.utc)
        self.root_key = ec.generate_private_key(ec.SECP256R1())
        self.int_key = ec.generate_private_key(ec.SECP256R1())
        self.leaf_key = ec.generate_private_key(ec.SECP256R1())
        root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Indie Test Root CA - G3"),
                               x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Independent Conformance Ltd"),
                               x509.NameAttribute(NameOID.COUNTRY_NAME, "US")])
        int_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Indie Worldwide Developer Relations CA"),
                              x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "G6"),
                              x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Independent Conformance Ltd"),
                              x509.NameAttribute(NameOID.COUNTRY_NAME, "US")])
        leaf_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Indie ECC Receipt Signing"),
                               x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Independent Conformance Ltd"),
                               x509.NameAttribute(NameOID.COUNTRY_NAME, "US")])

        def ski(key):
            return x509.SubjectKeyIdentifier.from_public_key(key.public_key())

        self.root = (x509.CertificateBuilder().subject_name(root_name).issuer_name(root_name)
                     .public_key(self.root_key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(not_before).not_valid_after(not_after)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
                     .add_extension(ski(self.root_key), critical=False)
                     .sign(self.root_key, hashes.SHA384()))
        self.intermediate = (x509.CertificateBuilder().subject_name(int_name).issuer_name(root_name)
                             .public_key(self.int_key.public_key()).serial_number(x509.random_serial_number())
                             .not_valid_before(not_before).not_valid_after(not_after)
                             .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                             .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
                             .add_extension(ski(self.int_key), critical=False)
                             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.root_key.public_key()), critical=False)
                             .add_extension(x509.UnrecognizedExtension(x509.ObjectIdentifier(OID_INTERMEDIATE), b"\x05\x00"), critical=False)
                             .sign(self.root_key, hashes.SHA384()))
        leaf = (x509.CertificateBuilder().subject_name(leaf_name).issuer_name(int_name)
                .public_key(self.leaf_key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(not_before).not_valid_after(not_after))
        if os.environ.get("INDIE_MINIMAL_LEAF") != "1":
            leaf = (leaf.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                    .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
                    .add_extension(ski(self.leaf_key), critical=False)
                    .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.int_key.public_key()), critical=False))
        self.leaf = (leaf.add_extension(x509.UnrecognizedExtension(x509.ObjectIdentifier(OID_LEAF), b"\x05\x00"), critical=False)
                     .sign(self.int_key, hashes.SHA256()))
        self.root_pem_path = os.path.join(directory, "IndieRootCA.pem")
        self.root_der_path = os.path.join(directory, "IndieRootCA.cer")
        with open(self.root_pem_path, "wb") as f:
            f.write(self.root.public_bytes(serialization.Encoding.PEM))
        with open(self.root_der_path, "wb") as f:
            f.write(self.root.public_bytes(serialization.Encoding.DER))
        self.x5c = [base64.b64encode(c.public_bytes(serialization.Encoding.DER)).decode("ascii")
                    for c in (self.leaf, self.intermediate, self.root)]

    def sign_jws(self, payload: dict) -> str:
        header = {"x5c": self.x5c, "alg": "ES256"}  # no "typ", x5c first: legal, not Apple's order
        signing_input = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "." +
                         b64url(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")))
        der = self.leaf_key.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


# --------------------------------------------------------------------------------------------
# HTTPS: a private CA (not in any system bundle) and a server certificate for localhost and
# 127.0.0.1, as a server behind a company CA would have. Nothing to do with the JWS chain.
# --------------------------------------------------------------------------------------------
class TLSIdentity:
    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        now = dt.datetime.now(dt.timezone.utc)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Indie Private TLS CA")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
              .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
              .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
                .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        self.ca_path = os.path.join(directory, "tls-ca.pem")
        self.cert_path = os.path.join(directory, "tls-server.pem")
        self.key_path = os.path.join(directory, "tls-server.key")
        with open(self.ca_path, "wb") as f:
            f.write(ca.public_bytes(serialization.Encoding.PEM))
        with open(self.cert_path, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(self.key_path, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))

    def context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_path, self.key_path)
        return ctx


# --------------------------------------------------------------------------------------------
# The In-App Purchase key churnwatch signs its request JWTs with.
# --------------------------------------------------------------------------------------------
class APIKey:
    def __init__(self, directory: str, key_id: str, issuer_id: str, bundle_id: str):
        self.key_id, self.issuer_id, self.bundle_id = key_id, issuer_id, bundle_id
        self.private_key = ec.generate_private_key(ec.SECP256R1())
        self.path = os.path.join(directory, f"SubscriptionKey_{key_id}.p8")
        pem = self.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption())
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem.rstrip(b"\n"))  # downloaded .p8 files end without a newline
        self.public_key = self.private_key.public_key()

    def check(self, authorization: str | None, bundle_ids=None) -> str | None:
        """None when the bearer token is acceptable, else why not (for the log)."""
        return self.verify(authorization, bundle_ids)[0]

    @staticmethod
    def claimed_bid(authorization: str | None) -> str | None:
        """The token's `bid` claim, unverified (None if there is none to read)."""
        try:
            claims = json.loads(b64url_decode(authorization[len("Bearer "):].strip().split(".")[1]))
            return claims.get("bid") if isinstance(claims.get("bid"), str) else None
        except Exception:  # noqa: BLE001
            return None

    def verify(self, authorization: str | None, bundle_ids=None) -> tuple[str | None, str | None]:
        """(None, bid) when the bearer token is acceptable, else (why not, None). One team key
        signs the requests for every app of the team: `bid` must be one of `bundle_ids` (the
        apps the server serves; default: the key's own bundle id) and picks the app."""
        why = self._verify(authorization, bundle_ids if bundle_ids is not None else [self.bundle_id])
        return (why, None) if why is not None else (None, self.claimed_bid(authorization))

    def _verify(self, authorization: str | None, bundle_ids) -> str | None:
        if not authorization or not authorization.startswith("Bearer "):
            return "no bearer token"
        parts = authorization[len("Bearer "):].strip().split(".")
        if len(parts) != 3:
            return "not a compact JWS"
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            sig = b64url_decode(parts[2])
        except Exception as e:  # noqa: BLE001
            return f"undecodable token: {e}"
        if header.get("alg") != "ES256":
            return f"alg {header.get('alg')!r}"
        if header.get("kid") != self.key_id:
            return f"kid {header.get('kid')!r}"
        if len(sig) != 64:
            return f"signature is {len(sig)} bytes, not raw R||S"
        try:
            der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
            self.public_key.verify(der, (parts[0] + "." + parts[1]).encode("ascii"), ec.ECDSA(hashes.SHA256()))
        except Exception:  # noqa: BLE001
            return "bad signature"
        if claims.get("iss") != self.issuer_id:
            return f"iss {claims.get('iss')!r}"
        aud = claims.get("aud")
        if aud != "appstoreconnect-v1" and not (isinstance(aud, list) and aud == ["appstoreconnect-v1"]):
            return f"aud {aud!r}"
        if not isinstance(claims.get("bid"), str) or claims.get("bid") not in bundle_ids:
            return f"bid {claims.get('bid')!r}"
        now = time.time()  # request tokens live in real time, not simulated time
        exp, iat = claims.get("exp"), claims.get("iat")
        if not isinstance(exp, (int, float)) or exp <= now:
            return f"exp {exp!r} (now {int(now)})"
        if iat is not None:
            if not isinstance(iat, (int, float)) or iat > now + 60:
                return f"iat {iat!r} in the future"
            if exp - iat > 3600:
                return "exp more than 60 min after iat"
        elif exp - now > 3600:
            return "exp more than 60 min ahead"
        return None

