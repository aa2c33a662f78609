//! A test PKI made with `openssl`: a root CA, a server certificate for 127.0.0.1 and a client certificate
//! it signed (and one with an unknown critical extension), and a second CA with a client certificate of its own
//! (one the server does not trust).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct Pki {
    pub dir: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl is installed");
    assert!(status.success(), "openssl {args:?} failed");
}

/// A CA's key and self-signed certificate: `<name>.key`, `<name>.pem`.
fn ca(dir: &Path, name: &str) {
    let (key, pem, subj) = (
        format!("{name}.key"),
        format!("{name}.pem"),
        format!("/CN=knee test {name}"),
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &subj,
            "-keyout",
            &key,
            "-out",
            &pem,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// A leaf `<name>.key` / `<name>.pem` signed by CA `by`, with the extensions `ext` (one per line).
fn leaf(dir: &Path, name: &str, by: &str, ext: &str) {
    let (key, csr, pem, cnf) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.cnf"),
    );
    std::fs::write(dir.join(&cnf), format!("basicConstraints=CA:FALSE\n{ext}\n")).unwrap();
    let subj = format!("/CN=knee test {name}");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &subj,
            "-keyout",
            &key,
            "-out",
            &csr,
        ],
    );
    let (ca_pem, ca_key) = (format!("{by}.pem"), format!("{by}.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &pem,
            "-extfile",
            &cnf,
        ],
    );
}

impl Pki {
    pub fn new(dir: &Path) -> Pki {
        ca(dir, "root");
        leaf(
            dir,
            "server",
            "root",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth",
        );
        leaf(dir, "client", "root", "extendedKeyUsage=clientAuth");
        // Signed by the right CA, with a critical extension no verifier knows (as a grid proxy's proxyCertInfo):
        // knee presents it, and the server refuses it.
        leaf(
            dir,
            "odd",
            "root",
            "extendedKeyUsage=clientAuth\n1.3.6.1.4.1.55555.1=critical,ASN1:UTF8String:knee",
        );
        ca(dir, "other");
        leaf(dir, "rogue", "other", "extendedKeyUsage=clientAuth");
        Pki { dir: dir.to_path_buf() }
    }

    /// A rustls server configuration presenting the server certificate, asking for no client's.
    pub fn server_config(&self) -> rustls::ServerConfig {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from_pem_file(self.dir.join("server.pem")).unwrap()],
                PrivateKeyDer::from_pem_file(self.dir.join("server.key")).unwrap(),
            )
            .unwrap()
    }

    /// A file of the PKI as text (`root.pem`, `client.key` …).
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap()
    }
}
