// What npm publishes of the package, and examples/quickstart.js run as a
// user runs it, against a real idgen.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { startIdgen, type IdgenProcess } from "./idgen.js";

/** The first directory above this file that holds file and passes ok. */
function above(file: string, ok: (dir: string) => boolean = () => true): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, file)) && ok(dir)) {
      return dir;
    }
    dir = dirname(dir);
  }
  throw new Error(`no ${file} above ${fileURLToPath(import.meta.url)}`);
}

const pkgDir = above("package.json", (d) => JSON.parse(readFileSync(join(d, "package.json"), "utf8")).name === "@idgen/client");
const repoRoot = above("go.mod");
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));

/** The paths npm pack would put in the tarball (scripts not run: dist is built). */
function packedFiles(): string[] {
  const r = spawnSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: pkgDir, encoding: "utf8", timeout: 120_000 });
  assert.equal(r.status, 0, `npm pack --dry-run: ${r.error?.message ?? r.stderr}`);
  const out = JSON.parse(r.stdout) as { files: { path: string }[] }[];
  return out[0]!.files.map((f) => f.path).sort();
}

describe("package", () => {
  let files: string[] = [];
  before(() => {
    files = packedFiles();
  });

  it("ships the built code, its types, the README, the license and nothing else", () => {
    const extra = files.filter(
      (f) => !["LICENSE", "README.md", "package.json"].includes(f) && !/^dist\/src\/.+\.(js|d\.ts)$/.test(f),
    );
    assert.deepEqual(extra, [], "files outside dist/src's .js and .d.ts");
    for (const f of ["LICENSE", "README.md", "package.json"]) {
      assert.ok(files.includes(f), `${f} is not packed`);
    }
    for (const js of files.filter((f) => f.endsWith(".js"))) {
      assert.ok(files.includes(js.replace(/\.js$/, ".d.ts")), `${js} is packed without its .d.ts`);
    }
  });

  it("packs what main, types and exports name", () => {
    const targets = [pkg.main, pkg.types, ...Object.values(pkg.exports["."] as Record<string, string>)];
    for (const t of targets) {
      assert.ok(files.includes(t.replace(/^\.\//, "")), `${t} is named in package.json but not packed`);
    }
  });

  it("is Apache-2.0, as the repository, with its license text", () => {
    assert.equal(pkg.license, "Apache-2.0");
    assert.equal(pkg.private, undefined, "a private package cannot be published");
    assert.equal(readFileSync(join(pkgDir, "LICENSE"), "utf8"), readFileSync(join(repoRoot, "LICENSE"), "utf8"), "LICENSE differs from the repository's: copy it again");
  });

  it("depends on every package the built code imports", () => {
    const deps = Object.keys(pkg.dependencies ?? {});
    for (const f of files.filter((f) => f.endsWith(".js"))) {
      const code = readFileSync(join(pkgDir, f), "utf8");
      for (const m of code.matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)) {
        const spec = m[1]!;
        if (spec.startsWith(".") || spec.startsWith("node:")) {
          continue;
        }
        const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!;
        assert.ok(deps.includes(name), `${f} imports ${spec}, but ${name} is not in dependencies`);
      }
    }
  });
});

/** Runs examples/quickstart.js with env added, bounded by a minute. */
function runExample(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(pkgDir, "examples", "quickstart.js")], {
      cwd: pkgDir,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
    child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.once("error", reject);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("examples/quickstart.js", () => {
  let idgen: IdgenProcess | undefined;
  let url = "";
  let token = "";
  let namespace = "";

  before(async () => {
    const given = process.env.IDGEN_TEST_URL;
    if (given) {
      url = given;
      token = process.env.IDGEN_TEST_TOKEN ?? "";
      namespace = process.env.IDGEN_TEST_STRICT_NAMESPACE ?? "";
      assert.ok(namespace, "IDGEN_TEST_URL is set: set IDGEN_TEST_STRICT_NAMESPACE too");
    } else {
      idgen = await startIdgen();
      ({ url, token, strictNamespace: namespace } = idgen);
    }
  });

  after(async () => {
    await idgen?.stop();
  });

  it("runs against idgen serve", async () => {
    const r = await runExample({ IDGEN_URL: url, IDGEN_TOKEN: token, IDGEN_NAMESPACE: namespace });
    assert.equal(r.code, 0, `exit code; stderr:\n${r.stderr}`);
    const want = [
      /^snowflake ids: \d+ \d+ \d+$/m,
      /^issued under worker \d+ of datacenter \d+, fencing version \d+$/m,
      /^parsed \d+: time \d{4}-\d\d-\d\dT[\d:.]+Z, worker \d+, sequence \d+$/m,
      /^streamed 100000 ids in 10 batches$/m,
      new RegExp(`^namespace ${namespace}: \\d+ \\d+ \\d+ \\(segment\\)$`, "m"),
    ];
    for (const re of want) {
      assert.match(r.stdout, re);
    }
  });

  // A node of IDGEN_TEST_URL without tokens refuses no token.
  const noTokens = Boolean(process.env.IDGEN_TEST_URL) && !process.env.IDGEN_TEST_TOKEN;
  it("says what idgen refused, and exits 1", { skip: noTokens && "IDGEN_TEST_URL without IDGEN_TEST_TOKEN" }, async () => {
    const r = await runExample({ IDGEN_URL: url, IDGEN_TOKEN: "not-a-token", IDGEN_NAMESPACE: "" });
    assert.equal(r.code, 1, `exit code; stdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
    assert.match(r.stderr, /\(problem: unauthorized\)/);
  });
});
