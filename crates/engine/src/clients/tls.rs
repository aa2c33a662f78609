//! The rustls client config of a group (`TlsSpec`): trust (webpki roots and/or the given CAs, or with
//! `insecure` a verifier that accepts any certificate), the client certificate, the TLS versions,
//! session resumption and ALPN; and the words for a TLS failure (the server's alert by its name).

use std::fmt::Write as _;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::KeyProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{ClientConfig, DigitallySignedStruct, InconsistentKeys, RootCertStore, SignatureScheme};

use crate::spec::TlsSpec;

/// `insecure`: every certificate and every handshake signature is accepted, whatever the TLS version.
#[derive(Debug)]
struct AcceptAnything(Vec<SignatureScheme>);

/// A handshake signature's check.
type SignatureCheck = Result<HandshakeSignatureValid, rustls::Error>;

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(&self, _: &[u8], _: &CertificateDer<'_>, _: &DigitallySignedStruct) -> SignatureCheck {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(&self, _: &[u8], _: &CertificateDer<'_>, _: &DigitallySignedStruct) -> SignatureCheck {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.clone()
    }
}

/// Why a group's TLS config could not be built: a sentence naming the spec key and the fix.
pub(crate) type ConfigError = String;

/// The certificates in a PEM text (other sections skipped); `what` names the key in errors.
fn certificates(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} is not valid PEM ({e})"))?;
    if certs.is_empty() {
        return Err(format!("{what} holds no certificate (no BEGIN CERTIFICATE section)"));
    }
    Ok(certs)
}

/// The trust anchors: webpki's roots and/or the CA certificates given.
fn roots(spec: &TlsSpec) -> Result<RootCertStore, ConfigError> {
    let mut roots = RootCertStore::empty();
    if spec.webpki_roots {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    if let Some(pem) = &spec.ca_pem {
        let (added, _ignored) = roots.add_parsable_certificates(certificates(pem, "tls.ca_pem")?);
        if added == 0 {
            return Err("tls.ca_pem holds no usable CA certificate; give PEM CA certificates".to_string());
        }
    }
    if roots.is_empty() {
        return Err(
            "tls trusts no CA (webpki_roots is false and no ca_pem); give ca_pem or set webpki_roots".to_string(),
        );
    }
    Ok(roots)
}

/// The client certificate chain and its signing key: the key from `key_pem`, else from `cert_pem` (a proxy
/// file holding both); the key must be the certificate's.
fn identity(spec: &TlsSpec, keys: &dyn KeyProvider) -> Result<Option<CertifiedKey>, ConfigError> {
    let Some(cert) = &spec.cert_pem else {
        return match spec.key_pem {
            Some(_) => Err("tls.key_pem is given without cert_pem; give the certificate too".to_string()),
            None => Ok(None),
        };
    };
    let chain = certificates(cert, "tls.cert_pem")?;
    let (from, text) = match &spec.key_pem {
        Some(k) => ("tls.key_pem", k),
        None => ("tls.cert_pem", cert),
    };
    let key = PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|e| {
        format!("{from} holds no usable private key ({e}); give an unencrypted PEM key (PKCS#8, PKCS#1 or SEC1)")
    })?;
    let key = keys
        .load_private_key(key)
        .map_err(|e| format!("{from}: its key cannot sign ({e}); give an RSA, ECDSA or Ed25519 key"))?;
    let certified = CertifiedKey::new(chain, key);
    matching(&certified)?;
    Ok(Some(certified))
}

/// The client certificate is of the key. Compared by their SubjectPublicKeyInfo, as rustls does, but read
/// from the certificate here when webpki will not parse it: a grid proxy (RFC 3820) has a critical
/// proxyCertInfo extension webpki does not know, and the server, not knee, is the one to judge it.
fn matching(certified: &CertifiedKey) -> Result<(), ConfigError> {
    const MISMATCH: &str = "tls.cert_pem and its key do not match; give the key of that certificate";
    match certified.keys_match() {
        // Unknown: the key cannot tell its public key (rustls accepts it so too)
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(()),
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => Err(MISMATCH.to_string()),
        Err(e @ rustls::Error::InvalidCertificate(_)) => {
            let cert = certified.cert.first().map(|c| c.as_ref()).unwrap_or_default();
            match (spki_of(cert), certified.key.public_key()) {
                (Some(spki), Some(key)) if spki == key.as_ref() => Ok(()),
                (Some(_), _) => Err(MISMATCH.to_string()),
                (None, _) => Err(format!(
                    "tls.cert_pem: the client certificate is not a readable X.509 certificate ({e}); give a PEM \
                     certificate"
                )),
            }
        }
        Err(e) => Err(format!("tls.cert_pem and its key cannot be used together ({e})")),
    }
}

/// A DER element: its tag, its contents, the whole element, and what follows it.
struct Element<'a> {
    tag: u8,
    contents: &'a [u8],
    whole: &'a [u8],
    rest: &'a [u8],
}

/// The DER element at the start of `der` (None if it is cut short, or its length is indefinite or over 4
/// bytes long).
fn element(der: &[u8]) -> Option<Element<'_>> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let bytes = rest.get(..n)?;
            (bytes.iter().fold(0usize, |a, b| a << 8 | usize::from(*b)), &rest[n..])
        }
        _ => return None,
    };
    let head = der.len() - rest.len();
    Some(Element {
        tag,
        contents: rest.get(..len)?,
        whole: &der[..head + len],
        rest: &rest[len..],
    })
}

/// The SubjectPublicKeyInfo (whole, as DER) of an X.509 certificate: the seventh field of its
/// TBSCertificate, or the sixth when it has no version (RFC 5280 §4.1).
fn spki_of(cert: &[u8]) -> Option<&[u8]> {
    fn sequence(e: Element<'_>) -> Option<Element<'_>> {
        (e.tag == 0x30).then_some(e)
    }
    let certificate = sequence(element(cert)?)?;
    let tbs = sequence(element(certificate.contents)?)?.contents;
    let first = element(tbs)?;
    // [0] version, then serialNumber, signature, issuer, validity, subject
    let mut rest = if first.tag == 0xa0 { first.rest } else { tbs };
    for _ in 0..5 {
        rest = element(rest)?.rest;
    }
    Some(sequence(element(rest)?)?.whole)
}

/// The rustls config of a group: `alpn` is the protocols offered (`h2`, or `http/1.1`).
pub(crate) fn client_config(spec: &TlsSpec, insecure: bool, alpn: &[u8]) -> Result<Arc<ClientConfig>, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let keys = provider.key_provider;
    let schemes = provider.signature_verification_algorithms.supported_schemes();
    let versions: &[&rustls::SupportedProtocolVersion] = match spec.version.as_deref() {
        Some("1.2") => &[&rustls::version::TLS12],
        Some("1.3") => &[&rustls::version::TLS13],
        _ => rustls::DEFAULT_VERSIONS,
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| format!("tls.version: {e}"))?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnything(schemes)))
    } else {
        builder.with_root_certificates(roots(spec)?)
    };
    let mut config = match identity(spec, keys)? {
        None => builder.with_no_client_auth(),
        Some(certified) => builder.with_client_cert_resolver(Arc::new(SingleCertAndKey::from(certified))),
    };
    if !spec.resume {
        config.resumption = Resumption::disabled();
    }
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(config))
}

/// A short text on the stack (an alert's Debug name), so naming an alert allocates nothing.
struct Name {
    buf: [u8; 64],
    len: usize,
}

impl std::fmt::Write for Name {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// An alert's name in words: `UnknownCA` → "unknown ca", `CertificateRequired` → "certificate required".
fn alert_words(alert: rustls::AlertDescription, out: &mut String) {
    let mut name = Name { buf: [0; 64], len: 0 };
    let _ = write!(name, "{alert:?}");
    let mut prev_lower = false;
    for &b in &name.buf[..name.len] {
        if b.is_ascii_uppercase() && prev_lower {
            out.push(' ');
        }
        prev_lower = b.is_ascii_lowercase() || b.is_ascii_digit();
        out.push(char::from(b.to_ascii_lowercase()));
    }
}

/// A TLS failure in words: the server's alert by its name ("TLS alert from the server: unknown ca"), or what
/// knee's side found ("the server's certificate is not trusted: UnknownIssuer").
pub(crate) fn describe(e: &rustls::Error, out: &mut String) {
    match e {
        rustls::Error::AlertReceived(alert) => {
            out.push_str("TLS alert from the server: ");
            alert_words(*alert, out);
        }
        rustls::Error::InvalidCertificate(c) => {
            let _ = write!(out, "the server's certificate is not trusted: {c:?}");
        }
        other => {
            let _ = write!(out, "TLS: {other}");
        }
    }
}

/// The rustls error inside an I/O error, if that is what it carries (a failed handshake, or an alert read
/// with the response).
pub(crate) fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DER element of `tag` around `contents` (short, one-byte and two-byte lengths).
    fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
        let n = contents.len();
        let mut out = vec![tag];
        match n {
            0..=0x7f => out.push(n as u8),
            0x80..=0xff => out.extend([0x81, n as u8]),
            _ => out.extend([0x82, (n >> 8) as u8, n as u8]),
        }
        out.extend_from_slice(contents);
        out
    }

    /// A certificate's shape: TBSCertificate (with or without its [0] version), then the signature.
    fn certificate(version: bool, spki: &[u8]) -> Vec<u8> {
        let mut tbs = Vec::new();
        if version {
            tbs.extend(tlv(0xa0, &tlv(0x02, &[2])));
        }
        tbs.extend(tlv(0x02, &[0x01, 0x23])); // serialNumber
        tbs.extend(tlv(0x30, &tlv(0x06, &[1, 2, 3]))); // signature
        tbs.extend(tlv(0x30, &[0x31; 40])); // issuer
        tbs.extend(tlv(0x30, &[0x17; 30])); // validity
        tbs.extend(tlv(0x30, &[0x31; 300])); // subject: a two-byte length
        tbs.extend(spki);
        tbs.extend(tlv(0xa3, &[0x30; 10])); // extensions
        let mut cert = tlv(0x30, &tbs);
        cert.extend(tlv(0x30, &tlv(0x06, &[1, 2, 3])));
        cert.extend(tlv(0x03, &[0; 64]));
        tlv(0x30, &cert)
    }

    #[test]
    fn the_public_key_is_read_from_a_certificate_webpki_will_not_parse() {
        let spki = tlv(0x30, &[0x42; 200]); // a one-byte long-form length
        for version in [true, false] {
            assert_eq!(
                spki_of(&certificate(version, &spki)),
                Some(&spki[..]),
                "version: {version}"
            );
        }
        let whole = certificate(true, &spki);
        for cut in [0, 1, 3, 40, whole.len() / 2, whole.len() - 1] {
            assert_eq!(spki_of(&whole[..cut]), None, "cut at {cut}");
        }
        // an indefinite length (BER, not DER) and a length over 4 bytes are not read
        assert!(element(&[0x30, 0x80, 0, 0]).is_none());
        assert!(element(&[0x30, 0x85, 0, 0, 0, 0, 1, 0]).is_none());
        let e = element(&[0x04, 0x82, 0x01, 0x00]).map(|e| e.contents.len());
        assert_eq!(e, None, "cut short");
        // the key's field is a SEQUENCE or nothing
        assert_eq!(spki_of(&certificate(true, &tlv(0x04, &[1]))), None);
    }

    #[test]
    fn alerts_read_as_words() {
        let mut s = String::new();
        describe(
            &rustls::Error::AlertReceived(rustls::AlertDescription::UnknownCA),
            &mut s,
        );
        assert_eq!(s, "TLS alert from the server: unknown ca");
        s.clear();
        alert_words(rustls::AlertDescription::CertificateRequired, &mut s);
        assert_eq!(s, "certificate required");
        s.clear();
        alert_words(rustls::AlertDescription::BadCertificate, &mut s);
        assert_eq!(s, "bad certificate");
    }

    #[test]
    fn bad_material_is_one_sentence() {
        let spec = TlsSpec {
            ca_pem: Some("not pem".into()),
            webpki_roots: false,
            ..TlsSpec::default()
        };
        let e = client_config(&spec, false, b"http/1.1").unwrap_err();
        assert!(e.starts_with("tls.ca_pem holds no certificate"), "{e}");
        let spec = TlsSpec {
            webpki_roots: false,
            ..TlsSpec::default()
        };
        assert!(client_config(&spec, false, b"h2").unwrap_err().contains("trusts no CA"));
        assert!(client_config(&spec, true, b"h2").is_ok());
    }
}
