-- The part of LuaUnit's interface that graded Lua tests use (MultiPL-E's: `lu =
-- require('luaunit')`, `lu.assertEquals(...)` in global `test*` functions, and
-- `os.exit(lu.LuaUnit.run())`), written for a2e-engine's run_code: no registry that .ci/run
-- reaches carries LuaUnit itself. Its verdicts are LuaUnit's: a test fails when an assertion
-- fails or it raises; run() prints LuaUnit's text report and returns the number of tests that
-- did not pass, which os.exit makes the exit status. A failed assertion raises what LuaUnit's
-- does, "file:line: LuaUnit test FAILURE: message", so that one outside any test (at a
-- program's top level) ends it with that line on stderr, as graders look for.

local M = { VERSION = "a2e-subset", FAILURE_PREFIX = "LuaUnit test FAILURE: " }

local function prettystr(value, seen)
  if type(value) == "string" then
    return string.format("%q", value)
  end
  if type(value) ~= "table" then
    return tostring(value)
  end
  seen = seen or {}
  if seen[value] then
    return "<cycle>"
  end
  seen[value] = true
  local parts, count = {}, #value
  for i = 1, count do
    parts[#parts + 1] = prettystr(value[i], seen)
  end
  local keys = {}
  for key in pairs(value) do
    if not (math.type(key) == "integer" and key >= 1 and key <= count) then
      keys[#keys + 1] = key
    end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, key in ipairs(keys) do
    local shown = type(key) == "string" and key:match("^[%a_][%w_]*$") and key
      or "[" .. prettystr(key, seen) .. "]"
    parts[#parts + 1] = shown .. "=" .. prettystr(value[key], seen)
  end
  seen[value] = nil
  return "{" .. table.concat(parts, ", ") .. "}"
end
M.prettystr = prettystr

local function equal(a, b, seen)
  if a == b then
    return true
  end
  if type(a) ~= "table" or type(b) ~= "table" then
    return false
  end
  seen = seen or {}
  if seen[a] == b then
    return true
  end
  seen[a] = b
  for key, value in pairs(a) do
    if not equal(value, b[key], seen) then
      return false
    end
  end
  for key in pairs(b) do
    if a[key] == nil then
      return false
    end
  end
  return true
end

local function fail(message)
  error(message, 0)
end

-- The failure's message as LuaUnit reports it ("file:line: message"), or nil for an error
-- that is not an assertion's.
local function failure_message(err)
  if type(err) ~= "string" then
    return nil
  end
  local first, last = err:find(M.FAILURE_PREFIX, 1, true)
  if first == nil or (first > 1 and not err:sub(1, first - 1):match("^.*:%d+: $")) then
    return nil
  end
  return err:sub(1, first - 1) .. err:sub(last + 1)
end

-- "file:line: " of the test's line that called the assertion: `above` frames above where()'s
-- caller.
local function where(above)
  local info = debug.getinfo(above + 2, "Sl")
  if info and info.currentline and info.currentline > 0 then
    return info.short_src .. ":" .. info.currentline .. ": "
  end
  return ""
end

local function check(ok, message)
  if not ok then
    fail(where(2) .. M.FAILURE_PREFIX .. message)
  end
end

function M.fail(message)
  fail(where(1) .. M.FAILURE_PREFIX .. tostring(message))
end

function M.assertEquals(actual, expected)
  check(equal(actual, expected),
    "expected: " .. prettystr(expected) .. ", actual: " .. prettystr(actual))
end

function M.assertNotEquals(actual, expected)
  check(not equal(actual, expected), "Received the not expected value: " .. prettystr(actual))
end

function M.assertItemsEquals(actual, expected)
  local function counts(list)
    local found = {}
    for _, value in pairs(list) do
      local matched = false
      for _, entry in ipairs(found) do
        if equal(entry.value, value) then
          entry.count, matched = entry.count + 1, true
          break
        end
      end
      if not matched then
        found[#found + 1] = { value = value, count = 1 }
      end
    end
    return found
  end
  local same = type(actual) == "table" and type(expected) == "table"
  if same then
    local mine, theirs = counts(actual), counts(expected)
    same = #mine == #theirs
    for _, entry in ipairs(mine) do
      local matched = false
      for _, other in ipairs(theirs) do
        if equal(entry.value, other.value) and entry.count == other.count then
          matched = true
        end
      end
      same = same and matched
    end
  end
  check(same, "Content of the tables are not identical:\nExpected: " .. prettystr(expected)
    .. "\nActual: " .. prettystr(actual))
end

function M.assertAlmostEquals(actual, expected, margin)
  margin = margin or 1e-11
  check(type(actual) == "number" and type(expected) == "number"
    and math.abs(actual - expected) <= margin,
    "Values are not almost equal\nActual: " .. prettystr(actual) .. ", expected: "
    .. prettystr(expected) .. ", delta " .. tostring(margin) .. " above margin")
end

function M.assertTrue(value)
  check(value == true, "expected: true, actual: " .. prettystr(value))
end

function M.assertFalse(value)
  check(value == false, "expected: false, actual: " .. prettystr(value))
end

function M.assertNil(value)
  check(value == nil, "expected: nil, actual: " .. prettystr(value))
end

function M.assertNotNil(value)
  check(value ~= nil, "Received the not expected value: nil")
end

function M.assertIs(actual, expected)
  check(rawequal(actual, expected),
    "expected and actual object should not be different\nExpected: " .. prettystr(expected)
    .. "\nReceived: " .. prettystr(actual))
end

function M.assertNotIs(actual, expected)
  check(not rawequal(actual, expected), "expected and actual object should be different")
end

function M.assertStrContains(text, part)
  check(type(text) == "string" and text:find(part, 1, true) ~= nil,
    "Could not find substring " .. prettystr(part) .. " in string " .. prettystr(text))
end

function M.assertError(f, ...)
  check(not pcall(f, ...), "Expected an error when calling function but no error generated")
end

local function gather()
  local tests = {}
  for name, value in pairs(_G) do
    if type(name) == "string" and name:lower():sub(1, 4) == "test" then
      if type(value) == "function" then
        tests[#tests + 1] = { name = name, run = value }
      elseif type(value) == "table" then
        for method, f in pairs(value) do
          if type(method) == "string" and method:lower():sub(1, 4) == "test"
            and type(f) == "function" then
            tests[#tests + 1] = { name = name .. "." .. method, run = function() f(value) end }
          end
        end
      end
    end
  end
  table.sort(tests, function(a, b) return a.name < b.name end)
  return tests
end

local function plural(count, word)
  return count .. " " .. word .. (count == 1 and "" or (word:sub(-1) == "s" and "es" or "s"))
end

M.LuaUnit = {}

-- Runs every global test* function (and test* method of a global Test* table), in name order,
-- and returns how many did not pass. Callable as LuaUnit.run() or LuaUnit:run().
function M.LuaUnit.run(...)
  local started = os.clock()
  local failures, errors, marks = {}, {}, {}
  local tests = gather()
  for _, test in ipairs(tests) do
    local ok, err = xpcall(test.run, function(e)
      local failed = failure_message(e)
      if failed then
        return { luaunit_failure = true, message = failed }
      end
      return { message = tostring(e), trace = debug.traceback("", 2) }
    end)
    if ok then
      marks[#marks + 1] = "."
    elseif err.luaunit_failure then
      marks[#marks + 1] = "F"
      failures[#failures + 1] = { name = test.name, message = err.message }
    else
      marks[#marks + 1] = "E"
      errors[#errors + 1] = { name = test.name, message = err.message .. (err.trace or "") }
    end
  end
  print(table.concat(marks))
  local function report(title, list, first)
    if #list == 0 then
      return
    end
    print(title)
    print(string.rep("-", #title))
    for i, entry in ipairs(list) do
      print((first + i - 1) .. ") " .. entry.name)
      print(entry.message)
    end
  end
  report("Failed tests:", failures, 1)
  report("Tests with errors:", errors, #failures + 1)
  local passed = #tests - #failures - #errors
  local summary = string.format("Ran %d tests in %.3f seconds, %s, %s", #tests,
    os.clock() - started, plural(passed, "success"), plural(#failures, "failure"))
  if #errors > 0 then
    summary = summary .. ", " .. plural(#errors, "error")
  end
  print(summary)
  if #failures + #errors == 0 then
    print("OK")
  end
  return #failures + #errors
end

return M
