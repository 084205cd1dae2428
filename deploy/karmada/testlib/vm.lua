-- Runs one hook of a Karmada luaScript the way Karmada's gopher-lua VM does
-- (pkg/resourceinterpreter/customized/declarative/luavm), as far as Debian's
-- lua5.1 can:
--
--   lua5.1 vm.lua SCRIPT FUNCTION ARGS NRET NOW
--
-- SCRIPT: file holding the luaScript; FUNCTION: the hook (GetReplicas, ...);
-- ARGS: a Lua chunk returning the arguments as {n = count, ...} (run.py
-- writes it from JSON: null -> nil, {} and [] -> empty tables, as Karmada's
-- JSON decoding does); NRET: how many results Karmada reads; NOW: Unix time
-- that os.date reports as "now".
--
-- Prints the results as a JSON array encoded like gopher-json (what Karmada
-- encodes Lua results with): an empty table is [], a table met twice is an
-- error, keys all numbers 1..n -> array, all strings -> object, else an error.
--
-- The script runs in an environment holding only what Karmada's VM offers:
-- base functions (the ones Karmada disables raise an error), table, string
-- (Karmada's safe subset), math, os.time and os.date, require("kube") (a stub:
-- none of sitegrid's scripts uses it). Assigning any global but the hook
-- function is an error: Karmada's VMs are pooled and shared by scripts.

local scriptFile, fnName, argsFile, nret, now = arg[1], arg[2], arg[3], tonumber(arg[4]), tonumber(arg[5])
if not (scriptFile and fnName and argsFile and nret and now) then
  io.stderr:write("usage: lua5.1 vm.lua SCRIPT FUNCTION ARGS NRET NOW\n")
  os.exit(2)
end

local function readFile(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

---------------------------------------------------------------- environment
local env = {}
for _, name in ipairs({"assert", "error", "ipairs", "next", "pairs", "pcall", "print", "select",
    "tonumber", "tostring", "type", "unpack", "xpcall", "_VERSION"}) do
  env[name] = _G[name]
end
for _, name in ipairs({"collectgarbage", "dofile", "getfenv", "getmetatable", "load", "loadfile",
    "loadstring", "rawequal", "rawget", "rawset", "setfenv", "setmetatable", "module", "newproxy"}) do
  env[name] = function()
    error("call function " .. name .. " is not supported in karmada customized resourceinterpreter.")
  end
end
local function copyLib(lib, names)
  local t = {}
  for _, name in ipairs(names) do
    t[name] = lib[name]
  end
  return t
end
env.table = copyLib(table, {"concat", "insert", "maxn", "remove", "sort", "getn"})
env.string = copyLib(string, {"byte", "char", "dump", "find", "format", "gsub", "len", "lower",
  "match", "rep", "reverse", "sub", "upper", "gmatch"})
env.string.gfind = string.gmatch
env.math = {}
for k, v in pairs(math) do
  env.math[k] = v
end
env.os = {
  time = function(t)
    if t == nil then
      return now
    end
    return os.time(t)
  end,
  -- Karmada's os.date: "!" = UTC, "*t" = a table, else strftime.
  date = function(format, t)
    return os.date(format or "%c", t or now)
  end,
}
local kube = {}
for _, name in ipairs({"resourceAdd", "accuratePodRequirements", "getPodDependencies", "getResourceQuantity"}) do
  kube[name] = function()
    error("kube." .. name .. " is not emulated by deploy/karmada/testlib/vm.lua")
  end
end
env.require = function(name)
  if name == "kube" then
    return kube
  end
  error("module '" .. tostring(name) .. "' not found: no field package.preload['" .. tostring(name) .. "']")
end
env._G = env
setmetatable(env, {
  __newindex = function(t, k, v)
    if k ~= fnName then
      error("the script sets global '" .. tostring(k) .. "': make it local", 2)
    end
    rawset(t, k, v)
  end,
})

---------------------------------------------------------------- JSON (gopher-json)
local function encodeString(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' end
    if c == "\\" then return "\\\\" end
    return string.format("\\u%04x", c:byte())
  end) .. '"'
end

local encode
local function encodeTable(t, visited, out)
  if visited[t] then
    error("cannot encode recursively nested tables to JSON (a table is in the result twice)")
  end
  visited[t] = true
  local numbers, strings, count = 0, 0, 0
  for k in pairs(t) do
    count = count + 1
    if type(k) == "number" then
      numbers = numbers + 1
    elseif type(k) == "string" then
      strings = strings + 1
    else
      error("cannot encode mixed or invalid key types")
    end
  end
  if count == 0 then
    out[#out + 1] = "[]"
  elseif numbers == count then
    for i = 1, count do
      if t[i] == nil then
        error("cannot encode sparse array")
      end
    end
    out[#out + 1] = "["
    for i = 1, count do
      if i > 1 then out[#out + 1] = "," end
      encode(t[i], visited, out)
    end
    out[#out + 1] = "]"
  elseif strings == count then
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      out[#out + 1] = encodeString(k)
      out[#out + 1] = ":"
      encode(t[k], visited, out)
    end
    out[#out + 1] = "}"
  else
    error("cannot encode mixed or invalid key types")
  end
end

encode = function(v, visited, out)
  local kind = type(v)
  if v == nil then
    out[#out + 1] = "null"
  elseif kind == "boolean" then
    out[#out + 1] = tostring(v)
  elseif kind == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      error("json: unsupported value: " .. tostring(v))
    end
    if v == math.floor(v) and math.abs(v) < 2 ^ 53 then
      out[#out + 1] = string.format("%.0f", v)
    else
      out[#out + 1] = string.format("%.17g", v)
    end
  elseif kind == "string" then
    out[#out + 1] = encodeString(v)
  elseif kind == "table" then
    encodeTable(v, visited, out)
  else
    error("cannot encode " .. kind .. " to JSON")
  end
end

---------------------------------------------------------------- run
local function fail(msg)
  io.stderr:write(tostring(msg), "\n")
  os.exit(1)
end

local chunk, err = loadstring(readFile(scriptFile), "=luaScript")
if not chunk then fail("script does not compile: " .. err) end
setfenv(chunk, env)
-- Karmada gives each call one second; count instructions instead.
debug.sethook(function() error("the script runs too long") end, "", 100000000)
local ok, perr = pcall(chunk)
if not ok then fail("running the script: " .. tostring(perr)) end
local fn = rawget(env, fnName)
if fn == nil then fail("not found function " .. fnName) end
if type(fn) ~= "function" then fail(fnName .. " is not a function: " .. type(fn)) end

local argsChunk = assert(loadstring(readFile(argsFile), "=args"))
local args = argsChunk()
local results = {pcall(fn, unpack(args, 1, args.n))}
debug.sethook()
if not results[1] then fail(fnName .. ": " .. tostring(results[2])) end

-- Karmada encodes each result on its own.
local out = {"["}
for i = 1, nret do
  if i > 1 then out[#out + 1] = "," end
  local okEnc, encErr = pcall(encode, results[i + 1], {}, out)
  if not okEnc then fail("result " .. i .. ": " .. tostring(encErr)) end
end
out[#out + 1] = "]"
io.write(table.concat(out), "\n")
