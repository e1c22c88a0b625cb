#!/usr/bin/env node
// Pass counts by section for results of http-tests/cache-tests, one column group per result file.
//
//   node summarize.mjs --suite DIR [--honor-deps] [--failures] RESULT.json...
//
// --suite DIR    the suite's checkout (default: .build/cache-tests in this repo); its tests/index.mjs
//                gives each test's section (the suite's `id`, one per file in tests/), id and kind
// --honor-deps   count a test as passed only if every test in its `depends_on` passed too, as the
//                suite's results page does (it shows the others as "dependency failed")
// --failures     also list, per result file, each required test that did not pass and why
//
// Names come from NAME.meta.json beside NAME.json (written by run.sh), else the file's name;
// versions, run times and the suite commit from the meta file are printed under the table. No dependencies beyond node.
//
// Kinds (a test's `kind`; absent means required, as in the suite's lib/results.mjs):
//   required  the behaviour the specification requires (the page's ✅ / ⛔️)
//   optimal   what a good cache does, not a conformance problem when it doesn't (✅ / ⚠️)
//   check     informational, a yes/no about the cache's behaviour (● / ○); counted as "yes"
// Tests marked browser_only are never run by the CLI and are left out of every count.
//
// Result encoding (the CLI's JSON: test id -> result, from test-engine/client/test.mjs):
//   true                      the test passed
//   ["Assertion", message]    a checked behaviour was wrong: a failure (a "no" for a check)
//   ["Setup", message]        a step marked `setup` went wrong (status, headers or body the test
//                             needs before it can check anything): the page's 🔹, not a verdict
//   ["Setup", "retry"]        the cache sent the same request to the origin twice (↻)
//   ["AbortError", message]   a request got no answer within 10 s: a harness failure (⁉️)
//   [other name, message]     anything else thrown (TypeError "fetch failed" when the connection
//                             breaks, Error "Cannot find package 'undici'" for the interim tests
//                             when the suite's npm deps are missing): the page counts these as
//                             failures; here they are also counted under "errors"
//   absent                    not run (browser_only tests, or a crashed run)
// Only `true` counts as a pass. The totals lines break the required tests that did not pass
// down by these causes.
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL, fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
let suiteDir = path.resolve(here, '../../.build/cache-tests')
let honorDeps = false
let listFailures = false
const files = []
const argv = process.argv.slice(2)
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i]
  if (arg === '--suite') suiteDir = argv[++i]
  else if (arg.startsWith('--suite=')) suiteDir = arg.slice(8)
  else if (arg === '--honor-deps') honorDeps = true
  else if (arg === '--failures') listFailures = true
  else if (arg === '-h' || arg === '--help') {
    console.log('usage: node summarize.mjs [--suite DIR] [--honor-deps] [--failures] RESULT.json...')
    process.exit(0)
  } else files.push(arg)
}
if (files.length === 0) {
  console.error('summarize.mjs: give one or more result JSON files (see --help)')
  process.exit(2)
}
const indexFile = path.join(suiteDir, 'tests', 'index.mjs')
if (!fs.existsSync(indexFile)) {
  console.error(`summarize.mjs: no ${indexFile}; pass --suite with the suite's checkout`)
  process.exit(2)
}
const suites = (await import(pathToFileURL(indexFile).href)).default

const tests = new Map() // id -> { section, kind, depends }
for (const suite of suites) {
  for (const test of suite.tests) {
    if (test.browser_only === true) continue
    tests.set(test.id, { section: suite.id, kind: test.kind || 'required', depends: test.depends_on || [] })
  }
}

function classify (result) {
  if (result === undefined) return 'untested'
  if (result === true) return 'pass'
  if (!Array.isArray(result)) return 'error'
  if (result[0] === 'Assertion') return 'fail'
  if (result[0] === 'Setup') return result[1] === 'retry' ? 'retry' : 'setup'
  return 'error'
}

const impls = files.map(file => {
  const results = JSON.parse(fs.readFileSync(file, 'utf8'))
  const metaFile = file.replace(/\.json$/, '.meta.json')
  const meta = fs.existsSync(metaFile) ? JSON.parse(fs.readFileSync(metaFile, 'utf8')) : {}
  const name = meta.name || path.basename(file, '.json')
  const label = meta.version ? `${name} ${meta.version}` : name
  const status = new Map()
  for (const id of tests.keys()) status.set(id, classify(results[id]))
  const passed = id => {
    if (status.get(id) !== 'pass') return false
    if (!honorDeps) return true
    return tests.get(id).depends.every(dep => !tests.has(dep) || passed(dep))
  }
  const unknown = Object.keys(results).filter(id => !tests.has(id))
  if (unknown.length) console.error(`${file}: ${unknown.length} results for tests not in this suite checkout (another suite version?)`)
  return { file, name, label, meta, results, status, passed }
})

const kinds = ['required', 'optimal', 'check']
const kindHead = { required: 'req', optimal: 'opt', check: 'chk' }
const sections = suites.map(s => s.id).filter(id => [...tests.values()].some(t => t.section === id))

function count (impl, section, kind) {
  let pass = 0; let total = 0
  for (const [id, t] of tests) {
    if ((section && t.section !== section) || t.kind !== kind) continue
    total++
    if (impl.passed(id)) pass++
  }
  return `${pass}/${total}`
}

const header1 = ['section']
const header2 = ['']
for (const impl of impls) {
  header1.push(impl.name, '', '')
  header2.push(...kinds.map(k => kindHead[k]))
}
const rows = sections.map(section => {
  const row = [section]
  for (const impl of impls) row.push(...kinds.map(k => count(impl, section, k)))
  return row
})
const total = ['TOTAL']
for (const impl of impls) total.push(...kinds.map(k => count(impl, null, k)))

const all = [header1, header2, ...rows, total]
const width = all[0].map((_, col) => Math.max(...all.slice(1).map(r => r[col].length), col === 0 ? 7 : 0))
// an implementation's label spans its three columns
function render (row, isLabelRow) {
  let line = row[0].padEnd(width[0])
  for (let i = 0; i < impls.length; i++) {
    const cells = row.slice(1 + i * 3, 4 + i * 3)
    const span = width[1 + i * 3] + width[2 + i * 3] + width[3 + i * 3] + 4
    if (isLabelRow) line += ' | ' + cells[0].padEnd(span)
    else line += ' | ' + cells.map((c, j) => c.padStart(width[1 + i * 3 + j])).join('  ')
  }
  return line.trimEnd()
}
// columns sized to the counts, then widened when a label is longer than its group
for (let i = 0; i < impls.length; i++) {
  const span = width[1 + i * 3] + width[2 + i * 3] + width[3 + i * 3] + 4
  const need = impls[i].name.length - span
  if (need > 0) for (let j = 1; j <= 3; j++) width[i * 3 + j] += Math.ceil(need / 3)
}
const rule = '-'.repeat(render(header2, false).length)
console.log(`req = required passed/total, opt = optimal passed/total, chk = check "yes"/total` +
  (honorDeps ? ' (a test counts only if its dependencies passed)' : ''))
console.log(render(header1, true))
console.log(render(header2, false))
console.log(rule)
for (const row of rows) console.log(render(row, false))
console.log(rule)
console.log(render(total, false))
console.log('')

for (const impl of impls) {
  const why = {}
  for (const [id, t] of tests) {
    if (t.kind !== 'required' || impl.passed(id)) continue
    const s = impl.status.get(id) === 'pass' ? 'dependency' : impl.status.get(id)
    why[s] = (why[s] || 0) + 1
  }
  const extra = impl.meta.seconds !== undefined ? ` (run took ${impl.meta.seconds}s, suite ${String(impl.meta.suite_commit).slice(0, 12)}, node ${impl.meta.node})` : ''
  console.log(`${impl.label}: required not passed: ${Object.entries(why).map(([k, v]) => `${v} ${k}`).join(', ') || 'none'}${extra}`)
}

if (listFailures) {
  for (const impl of impls) {
    console.log(`\n== ${impl.label}: required tests not passed`)
    for (const [id, t] of tests) {
      if (t.kind !== 'required' || impl.passed(id)) continue
      const r = impl.results[id]
      const msg = r === true ? `dependency not passed: ${t.depends.filter(d => !impl.passed(d)).join(', ')}` : JSON.stringify(r)
      console.log(`${t.section.padEnd(18)} ${id}: ${msg}`)
    }
  }
}
