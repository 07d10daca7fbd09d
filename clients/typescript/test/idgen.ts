// A real idgen for the client's tests: the idgen binary of this repository
// (built with `go build ./cmd/idgen`, or the one IDGEN_BIN names), serving on
// SQLite in a temporary directory on a free loopback port, with a tokens
// file and an admin token, and a strict namespace created through the admin
// API.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** A running idgen serve. */
export interface IdgenProcess {
  /** Its base URL, http://127.0.0.1:PORT. */
  url: string;
  /** A caller token with the ids scope. */
  token: string;
  /** The admin token. */
  adminToken: string;
  /** A namespace in strict mode. */
  strictNamespace: string;
  /** What it wrote to stdout and stderr so far. */
  logs(): string;
  /** Stops it (SIGTERM, then SIGKILL after 10 s) and removes its directory. */
  stop(): Promise<void>;
}

const startTimeoutMs = 60_000;

/** The repository root: this file is clients/typescript/{test,dist/test}/idgen.{ts,js}. */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, "go.mod")) && existsSync(join(dir, "cmd", "idgen"))) {
      return dir;
    }
    dir = dirname(dir);
  }
  throw new Error("cannot find the idgen repository (go.mod and cmd/idgen) above the tests; set IDGEN_BIN");
}

/**
 * The idgen binary: IDGEN_BIN when set, else built into dir from the
 * repository's cmd/idgen with the go command on PATH.
 */
function idgenBinary(dir: string): string {
  const given = process.env.IDGEN_BIN;
  if (given) {
    return resolve(given);
  }
  const out = join(dir, "idgen");
  const go = spawnSync("go", ["build", "-o", out, "./cmd/idgen"], { cwd: repoRoot(), encoding: "utf8" });
  if (go.error !== undefined || go.status !== 0) {
    throw new Error(`go build ./cmd/idgen failed (set IDGEN_BIN to use a built binary): ${go.error?.message ?? go.stderr}`);
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts idgen serve and waits until it is ready and has a strict namespace. */
export async function startIdgen(): Promise<IdgenProcess> {
  const dir = mkdtempSync(join(tmpdir(), "idgen-ts-"));
  let child: ChildProcess | undefined;
  let output = "";
  try {
    const bin = idgenBinary(dir);
    const token = randomBytes(24).toString("base64url");
    const adminToken = randomBytes(24).toString("base64url");
    const hash = createHash("sha256").update(token).digest("hex");
    writeFileSync(join(dir, "tokens"), `ts-client ids ${hash}\n`, { mode: 0o600 });
    const addrFile = join(dir, "addr");
    child = spawn(
      bin,
      [
        "serve",
        "--listen", "127.0.0.1:0",
        "--addr-file", addrFile,
        "--dsn", `sqlite:${join(dir, "idgen.db")}`,
        "--tokens-file", join(dir, "tokens"),
        "--admin-token", adminToken,
        "--shutdown-timeout", "5s",
        "--drain-window", "0",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    const proc = child;
    proc.stdout?.on("data", (b: Buffer) => (output += b.toString()));
    proc.stderr?.on("data", (b: Buffer) => (output += b.toString()));
    let exited: string | undefined;
    const exit = new Promise<void>((res) =>
      proc.once("exit", (code, signal) => {
        exited = `exited with ${signal ?? code}`;
        res();
      }),
    );

    // The address, then /readyz: the worker lease is claimed.
    const deadline = Date.now() + startTimeoutMs;
    let addr = "";
    while (addr === "") {
      if (exited !== undefined) {
        throw new Error(`idgen serve ${exited} before writing --addr-file:\n${output}`);
      }
      if (Date.now() > deadline) {
        throw new Error(`idgen serve wrote no --addr-file within ${startTimeoutMs} ms:\n${output}`);
      }
      if (existsSync(addrFile)) {
        addr = readFileSync(addrFile, "utf8").trim();
      } else {
        await sleep(20);
      }
    }
    const url = `http://${addr}`;
    for (;;) {
      const res = await fetch(`${url}/readyz`).catch(() => undefined);
      if (res?.status === 200) {
        break;
      }
      if (exited !== undefined || Date.now() > deadline) {
        throw new Error(`idgen serve at ${url} did not become ready (${exited ?? `last /readyz ${res?.status}`}):\n${output}`);
      }
      await sleep(50);
    }

    const strictNamespace = "ts-client-strict";
    const created = await fetch(`${url}/admin/namespaces`, {
      method: "POST",
      headers: { Authorization: `Bearer ${adminToken}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: strictNamespace, mode: "strict", description: "the TypeScript client's tests" }),
    });
    if (created.status !== 201) {
      throw new Error(`POST /admin/namespaces: got ${created.status} ${await created.text()}, want 201`);
    }

    return {
      url,
      token,
      adminToken,
      strictNamespace,
      logs: () => output,
      stop: async () => {
        if (exited === undefined) {
          proc.kill("SIGTERM");
          const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
          await exit;
          clearTimeout(timer);
        }
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
    }
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
