import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validate as lintDockerfile } from 'dockerfile-utils';
import { DEPLOY, ROOT, read } from './support';

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

interface Stage {
  from: string;
  name: string | null;
  instructions: Instruction[];
}

/** A Dockerfile as stages of instructions: comments dropped, `\` continuations joined. */
function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i];
    if (/^\s*(#|$)/.test(line)) continue;
    while (line.trimEnd().endsWith('\\') && i + 1 < lines.length) {
      line = line.trimEnd().slice(0, -1) + ' ' + lines[++i].trim();
    }
    const match = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!match) throw new Error(`Dockerfile line ${start + 1}: not an instruction: ${line}`);
    const instruction = { keyword: match[1].toUpperCase(), args: match[2].trim(), line: start + 1 };
    if (instruction.keyword === 'FROM') {
      const [, from, name] = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args) ?? [];
      stages.push({ from, name: name ?? null, instructions: [] });
    } else if (stages.length === 0) {
      if (instruction.keyword !== 'ARG')
        throw new Error(`Dockerfile line ${start + 1}: ${instruction.keyword} before FROM`);
    } else {
      stages[stages.length - 1].instructions.push(instruction);
    }
  }
  return stages;
}

describe('deploy/docker/Dockerfile', () => {
  const text = read(join(DEPLOY, 'docker', 'Dockerfile'));
  const stages = parseDockerfile(text);
  const final = stages[stages.length - 1];
  const all = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.keyword === keyword);
  const nodeImage = /^ARG NODE_IMAGE=(\S+)$/m.exec(text)?.[1];

  it('has no problem the VS Code Dockerfile linter (dockerfile-utils) reports', () => {
    expect(
      lintDockerfile(text).map(
        (d) => `${d.range.start.line + 1}: ${typeof d.message === 'string' ? d.message : d.message.value}`,
      ),
    ).toEqual([]);
  });

  it('is multi-stage, every stage on Node 22', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(nodeImage).toMatch(/^node:22(-bookworm-slim|-alpine|\.[\d.]+-(bookworm-slim|alpine))/);
    for (const stage of stages) expect(stage.from === '${NODE_IMAGE}' || stage.from.startsWith('node:22')).toBe(true);
  });

  it('needs no registry but the base image: no `# syntax=` frontend, npm ci from an optional offline cache', () => {
    expect(text).not.toMatch(/^#\s*syntax=/im);
    for (const stage of stages.filter((s) => all(s, 'RUN').some((r) => /\bnpm ci\b/.test(r.args)))) {
      expect(all(stage, 'ARG').map((a) => a.args)).toContain('NPM_OFFLINE=false');
      expect(all(stage, 'COPY').map((c) => c.args)).toContain('deploy/docker/npm-cache /tmp/npm-cache');
      for (const run of all(stage, 'RUN').filter((r) => /\bnpm ci\b/.test(r.args))) {
        expect(run.args).toMatch(/--cache \/tmp\/npm-cache --offline="\$NPM_OFFLINE"/);
      }
    }
    expect(read(join(DEPLOY, 'docker', 'npm-cache', '.gitignore'))).toMatch(/^_cacache\/$/m);
  });

  it('builds with npm ci and npm run build in a build stage', () => {
    const build = stages.find((s) => all(s, 'RUN').some((r) => /npm run build/.test(r.args)));
    expect(build).toBeDefined();
    expect(all(build!, 'RUN').some((r) => /\bnpm ci\b/.test(r.args) && !/--omit=dev/.test(r.args))).toBe(true);
    expect(build).not.toBe(final);
  });

  it('ships production dependencies only: no npm install/ci with dev dependencies reaches the final stage', () => {
    for (const run of all(final, 'RUN')) {
      expect(run.args).not.toMatch(/\bnpm (install|i|ci)\b(?!.*--omit=dev)/);
    }
    const nodeModules = all(final, 'COPY').find((c) => /node_modules/.test(c.args));
    expect(nodeModules?.args).toMatch(/--from=(\S+)/);
    const source = stages.find((s) => s.name === /--from=(\S+)/.exec(nodeModules!.args)![1]);
    expect(
      all(source!, 'RUN').some((r) => /npm ci --omit=dev/.test(r.args) || /npm prune --omit=dev/.test(r.args)),
    ).toBe(true);
    expect(all(source!, 'RUN').every((r) => !/npm ci(?! --omit=dev)/.test(r.args))).toBe(true);
  });

  it('copies everything the process reads at run time into the final stage', () => {
    const copies = all(final, 'COPY').map((c) => c.args);
    for (const needed of [
      /\/src\/dist \.\/dist$/,
      /\/src\/node_modules \.\/node_modules$/,
      /^package\.json \.\/$/,
      /^db\/migrations \.\/db\/migrations$/,
      /^libs\/schemas\/wire \.\/libs\/schemas\/wire$/,
    ]) {
      expect(copies.some((c) => needed.test(c))).toBe(true);
    }
  });

  it('runs as a numeric non-root user, with ROOST_DATA_DIR=/data, port 8025 and a /healthz HEALTHCHECK', () => {
    const user = all(final, 'USER');
    expect(user).toHaveLength(1);
    expect(user[0].args).toMatch(/^[1-9]\d*(:\d+)?$/);
    // USER comes after the last RUN, so nothing after it runs as root
    expect(user[0].line).toBeGreaterThan(Math.max(...all(final, 'RUN').map((r) => r.line)));
    expect(
      all(final, 'ENV')
        .map((e) => e.args)
        .join(' '),
    ).toMatch(/ROOST_DATA_DIR=\/data/);
    expect(all(final, 'EXPOSE').map((e) => e.args)).toEqual(['8025 9464']);
    expect(
      all(final, 'ENV')
        .map((e) => e.args)
        .join(' '),
    ).toMatch(/ROOST_METRICS_PORT=9464/);
    expect(all(final, 'HEALTHCHECK')[0]?.args).toMatch(/\/healthz/);
    expect(all(final, 'ENTRYPOINT')[0]?.args).toBe('["roost"]');
  });

  it('sends only what the Dockerfile copies in the build context (.dockerignore allow-list)', () => {
    const ignore = read(join(ROOT, '.dockerignore'))
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(ignore[0]).toBe('*');
    const allowed = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/, ''));
    const sources = stages
      .flatMap((s) => all(s, 'COPY'))
      .filter((c) => !/--from=/.test(c.args))
      .flatMap((c) =>
        c.args
          .split(/\s+/)
          .filter((a) => !a.startsWith('--'))
          .slice(0, -1),
      );
    for (const source of sources) {
      expect([source, allowed.some((a) => source === a || source.startsWith(`${a}/`))]).toEqual([source, true]);
    }
  });
});

describe('deploy/docker/roost-entrypoint.sh', () => {
  // Run the real script with a stand-in `node` that prints what it was asked to run.
  const dir = mkdtempSync(join(tmpdir(), 'roost-entrypoint-'));
  writeFileSync(join(dir, 'node'), '#!/bin/sh\necho "role=${ROOST_ROLE:-unset} $*"\n');
  chmodSync(join(dir, 'node'), 0o755);
  const run = (args: string[], env: Record<string, string> = {}) =>
    spawnSync('sh', [join(DEPLOY, 'docker', 'roost-entrypoint.sh'), ...args], {
      encoding: 'utf8',
      env: { PATH: `${dir}:/usr/bin:/bin`, ROOST_APP_DIR: '/app', ...env },
    });

  it.each(['api', 'gateway', 'worker', 'all'])('`roost %s` runs main.js with ROOST_ROLE set', (role) => {
    expect(run([role], { ROOST_ROLE: 'api' }).stdout.trim()).toBe(`role=${role} /app/dist/apps/roost/src/main.js`);
  });

  it('no argument keeps ROOST_ROLE from the environment', () => {
    expect(run([], { ROOST_ROLE: 'gateway' }).stdout.trim()).toBe('role=gateway /app/dist/apps/roost/src/main.js');
  });

  it('`roost migrate` runs migrate.js', () => {
    expect(run(['migrate']).stdout.trim()).toBe('role=unset /app/dist/apps/roost/src/migrate.js');
  });

  it('anything else runs as a command', () => {
    expect(run(['echo', 'hello']).stdout.trim()).toBe('hello');
  });

  it('is valid POSIX sh', () => {
    expect(spawnSync('sh', ['-n', join(DEPLOY, 'docker', 'roost-entrypoint.sh')]).status).toBe(0);
  });
});
