import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..', '..');
const README = readFileSync(path.join(root, 'README.md'), 'utf8');
const DOCS = readdirSync(path.join(root, 'docs')).filter((file) => file.endsWith('.md'));

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const anchor = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replaceAll(' ', '-');
/** Headings outside code blocks. */
const headings = (text: string) => text.replace(/```[\s\S]*?```/g, '').match(/^#{1,4} .+$/gm)?.map((line) => line.replace(/^#+ /, '')) ?? [];

t.test('the README opens with its contents, which list every section, and every link to a section or page resolves', async (t) => {
  const contents = README.indexOf('**Contents**');
  t.ok(contents > 0 && contents < README.indexOf('\n## '), 'the contents come before the first section');
  const listed = README.slice(contents, README.indexOf('\n## ', contents));
  const sections = README.replace(/```[\s\S]*?```/g, '').match(/^## .+$/gm)!.map((line) => line.slice(3));
  for (const section of sections) t.match(listed, `](#${anchor(section)})`, `"${section}" is in the contents (add a line there for a new section)`);
  t.match(README.slice(0, README.indexOf('\n## ') + 40), /\n## The first ten minutes\n/, 'the first section is the walkthrough');

  for (const [file, text] of [['README.md', README], ...DOCS.map((page) => [`docs/${page}`, readFileSync(path.join(root, 'docs', page), 'utf8')])] as const) {
    const own = new Set(headings(text).map(anchor));
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue;
      const [where, fragment] = target!.split('#') as [string, string | undefined];
      const linked = where ? path.resolve(path.dirname(path.join(root, file)), where) : path.join(root, file);
      t.ok(existsSync(linked), `${file}: ${target} exists`);
      if (fragment && linked.endsWith('.md')) t.ok((where ? new Set(headings(readFileSync(linked, 'utf8')).map(anchor)) : own).has(fragment), `${file}: #${fragment} is a heading of ${where || file}`);
    }
  }
  for (const page of DOCS) t.match(README, `](docs/${page})`, `docs/${page} is linked from the README`);
});

t.test('the README is what a newcomer reads in one sitting: at most 500 lines, the rest in docs/', async (t) => {
  const lines = README.split('\n').length;
  t.ok(lines <= 500, `README.md has ${lines} lines`);
});

t.test('the benchmark tables of the README and docs/benchmarks.md are what bench/results say', async (t) => {
  const checked = spawnSync(process.execPath, [path.join(root, 'scripts', 'bench-summary.mjs'), '--check'], { encoding: 'utf8', timeout: 120_000 });
  t.equal(checked.status, 0, checked.stderr || 'the tables match the result files');
  const goals = README.slice(README.indexOf('<!-- bench-goals:start -->'), README.indexOf('<!-- bench-goals:end -->'));
  t.ok(goals.split('\n').length > 5, 'the README has the generated goals table');
  t.notMatch(README, /Measured[^.\n]*\d+(\.\d+)? ?(ms|µs|×)/, 'no measured figure typed into the README by hand');
});
