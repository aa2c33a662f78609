//! TLS with a private CA and client certificates, against a rustls server on 127.0.0.1:0 that requires
//! one (the PKI is made by `openssl`): trust by `ca_pem`, the client's identity, the server's alert when
//! the identity is missing or from another CA, the handshake timed apart, resumption counted (and held
//! against the server's own count), the TLS version.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::pki::Pki;
use common::*;
use knee_engine::{run, ErrorClass};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use serde_json::{json, Value};

/// What the server counted: requests answered, handshakes completed, and of them resumed.
#[derive(Clone, Default)]
struct Counts {
    requests: Arc<AtomicU64>,
    handshakes: Arc<AtomicU64>,
    resumed: Arc<AtomicU64>,
}

/// An HTTPS server requiring a client certificate signed by the PKI's root.
fn server(pki: &Pki) -> (u16, Counts) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(pki.dir.join("root.pem")).unwrap())
        .unwrap();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_file(pki.dir.join("server.pem")).unwrap()],
            PrivateKeyDer::from_pem_file(pki.dir.join("server.key")).unwrap(),
        )
        .unwrap();
    let counts = Counts::default();
    let c = counts.clone();
    let addr = https_server(config, b"hello\n", counts.requests.clone(), move |conn| {
        c.handshakes.fetch_add(1, Ordering::Relaxed);
        if conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
            c.resumed.fetch_add(1, Ordering::Relaxed);
        }
    });
    (addr.port(), counts)
}

fn client(port: u16, pki: &Pki, identity: Option<&str>) -> Value {
    let mut tls = json!({"ca_pem": pki.read("root.pem"), "webpki_roots": false});
    if let Some(name) = identity {
        tls["cert_pem"] = json!(pki.read(&format!("{name}.pem")));
        tls["key_pem"] = json!(pki.read(&format!("{name}.key")));
    }
    json!({"kind": "http", "url": format!("https://127.0.0.1:{port}/"), "tls": tls})
}

#[test]
fn client_certificates_trust_alerts_and_resumption() {
    let dir = temp_dir("tls-client-auth");
    let pki = Pki::new(&dir);
    let (port, counts) = server(&pki);

    // The right certificate: every request succeeds, one handshake per keep-alive client, timed apart.
    let r = run(one_group(2, json!({"total": 40}), client(port, &pki, Some("client")))).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (40, 0, 0), "{}", r.summary_json());
    assert_eq!((g.connect.len(), g.tls.len()), (2, 2));
    assert_eq!(counts.requests.load(Ordering::Relaxed), 40);

    // A proxy-style file: certificate and key in one PEM, given as cert_pem alone.
    let mut c = client(port, &pki, None);
    c["tls"]["cert_pem"] = json!(pki.read("client.pem") + &pki.read("client.key"));
    let r = run(one_group(1, json!({"total": 3}), c)).unwrap();
    assert_eq!(succeeded_failed_hung(&r.groups[0]), (3, 0, 0), "{}", r.summary_json());

    // No certificate, one from another CA, or one with a critical extension the server does not know (knee
    // presents it: judging it is the server's): the server's alert, by its name, class `tls`.
    for (identity, alert) in [
        (None, "certificate required"),
        (Some("rogue"), "unknown ca"),
        (Some("odd"), "certificate unknown"),
    ] {
        let r = run(one_group(1, json!({"total": 3}), client(port, &pki, identity))).unwrap();
        let g = &r.groups[0];
        assert_eq!(g.failures_of(ErrorClass::Tls), 3, "{}", r.summary_json());
        let reason = first_reason(&r);
        assert!(
            reason.contains(&format!("TLS alert from the server: {alert}")),
            "{reason}"
        );
    }

    // The server's certificate from a CA knee was not given: knee's side refuses it.
    let mut c = client(port, &pki, Some("client"));
    c["tls"]["ca_pem"] = json!(pki.read("other.pem"));
    let r = run(one_group(1, json!({"total": 2}), c)).unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::Tls), 2, "{}", r.summary_json());
    assert!(first_reason(&r).contains("not trusted: UnknownIssuer"));

    // webpki's roots added to the CA given: the private CA still verifies the server; webpki's alone do not.
    for (ca, failed) in [(true, 0), (false, 2)] {
        let mut c = client(port, &pki, Some("client"));
        c["tls"]["webpki_roots"] = json!(true);
        if !ca {
            c["tls"].as_object_mut().unwrap().remove("ca_pem");
        }
        let r = run(one_group(1, json!({"total": 2}), c)).unwrap();
        assert_eq!(r.groups[0].failures_of(ErrorClass::Tls), failed, "{}", r.summary_json());
        assert_eq!(r.groups[0].counts.outcomes.succeeded, 2 - failed);
    }

    // A new connection per request: resumed handshakes are counted as the server counts them, and none
    // are resumed when resumption is off.
    for resume in [true, false] {
        let before = (
            counts.handshakes.load(Ordering::Relaxed),
            counts.resumed.load(Ordering::Relaxed),
        );
        let mut c = client(port, &pki, Some("client"));
        c["new_connection"] = json!(true);
        c["tls"]["resume"] = json!(resume);
        let r = run(one_group(1, json!({"total": 30}), c)).unwrap();
        let g = &r.groups[0];
        assert_eq!(
            (g.counts.outcomes.succeeded, g.tls.len()),
            (30, 30),
            "{}",
            r.summary_json()
        );
        let handshakes = counts.handshakes.load(Ordering::Relaxed) - before.0;
        let resumed = counts.resumed.load(Ordering::Relaxed) - before.1;
        assert_eq!((handshakes, resumed), (30, g.counts.tls_resumed));
        if resume {
            assert!(resumed >= 25, "resumed {resumed} of 30");
        } else {
            assert_eq!(resumed, 0);
        }
    }

    // TLS 1.2 only.
    let mut c = client(port, &pki, Some("client"));
    c["tls"]["version"] = json!("1.2");
    let r = run(one_group(1, json!({"total": 2}), c)).unwrap();
    assert_eq!(succeeded_failed_hung(&r.groups[0]), (2, 0, 0), "{}", r.summary_json());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn tls_spec_mistakes_are_one_sentence() {
    let bad = |tls: Value, url: &str| {
        let spec =
            json!({"groups": [group("g", 1, json!({"total": 1}), json!({"kind": "http", "url": url, "tls": tls}))]});
        match knee_engine::Spec::from_json(&spec.to_string()) {
            Err(e) => e.to_string(),
            Ok(s) => run(s).err().map(|e| e.to_string()).unwrap_or_default(),
        }
    };
    let e = bad(json!({"version": "1.1"}), "https://127.0.0.1:1/");
    assert!(
        e.contains("tls.version \"1.1\" is not a TLS version knee speaks"),
        "{e}"
    );
    let e = bad(json!({"ca_pem": "x"}), "http://127.0.0.1:1/");
    assert!(e.contains("tls.ca_pem is set but the url is http://"), "{e}");
    let e = bad(
        json!({"cert_pem": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}),
        "https://127.0.0.1:1/",
    );
    assert!(e.contains("tls.cert_pem holds no usable private key"), "{e}");

    // A key that is not the certificate's, for a certificate webpki reads and for one it will not (an unknown
    // critical extension, as a grid proxy's proxyCertInfo): one sentence either way.
    let dir = temp_dir("tls-mismatch");
    let pki = Pki::new(&dir);
    for cert in ["client", "odd"] {
        let tls = json!({"cert_pem": pki.read(&format!("{cert}.pem")), "key_pem": pki.read("rogue.key"),
                         "ca_pem": pki.read("root.pem")});
        let e = bad(tls, "https://127.0.0.1:1/");
        assert!(
            e.contains("tls.cert_pem and its key do not match; give the key of that certificate"),
            "{cert}: {e}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}
