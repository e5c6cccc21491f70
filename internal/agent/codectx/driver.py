# Paddock code-context driver for Python. Requests arrive as JSON lines on
# fd 3 and replies leave as JSON lines on fd 4, so nothing the user's code
# prints on stdout or stderr can be taken for a control message.
import ast, base64, json, linecache, os, sys, traceback, warnings

_ctl_in = os.fdopen(3, "rb")
_ctl_out = os.fdopen(4, "wb", buffering=0)
_MAX_REPR = 1 << 20
_ns = {"__name__": "__main__", "__builtins__": __builtins__}

# Figures are drawn with Agg (MPLBACKEND) and sent after each run, so
# plt.show() shows them, as a notebook's inline backend does; its warning
# that Agg cannot show a window is noise here.
warnings.filterwarnings(
    "ignore",
    message=r"(Matplotlib is currently using agg|FigureCanvasAgg is non-interactive)",
    category=UserWarning,
)


def _send(msg):
    _ctl_out.write((json.dumps(msg) + "\n").encode())


def _readline():
    line = _ctl_in.readline()
    return line or None


def _figure_data(fig):
    # A figure as a notebook shows it: PNG (and SVG), with its repr.
    import io
    data = {"text/plain": repr(fig)}
    for fmt, mime in (("png", "image/png"), ("svg", "image/svg+xml")):
        b = io.BytesIO()
        try:
            fig.savefig(b, format=fmt, bbox_inches="tight")
        except Exception:
            continue
        raw = b.getvalue()
        data[mime] = base64.b64encode(raw).decode() if fmt == "png" else raw.decode("utf-8", "replace")
    return data


def _is_figure(value):
    figure = sys.modules.get("matplotlib.figure")
    return figure is not None and isinstance(value, figure.Figure)


def _bundle(value):
    if _is_figure(value):
        return _bounded(_figure_data(value))
    data = {}
    for meth, mime, binary in (
        ("_repr_png_", "image/png", True),
        ("_repr_svg_", "image/svg+xml", False),
        ("_repr_html_", "text/html", False),
        ("_repr_markdown_", "text/markdown", False),
        ("_repr_json_", "application/json", False),
    ):
        f = getattr(value, meth, None)
        if f is None or isinstance(value, type):
            continue
        try:
            out = f()
        except Exception:
            continue
        if out is None:
            continue
        if binary and isinstance(out, (bytes, bytearray)):
            out = base64.b64encode(out).decode()
        elif mime == "application/json" and not isinstance(out, str):
            out = json.dumps(out)
        data[mime] = out
    if type(value) in (dict, list, int, float, bool, str) and "application/json" not in data:
        try:
            data["application/json"] = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            pass
    try:
        data["text/plain"] = repr(value)
    except Exception as e:
        data["text/plain"] = "<repr failed: %s>" % type(e).__name__
    return _bounded(data)


def _bounded(data):
    # Each reply is one line the agent bounds; a huge value is cut, not
    # allowed to break the channel.
    for k in list(data):
        if len(data[k]) > _MAX_REPR:
            if k == "text/plain":
                data[k] = data[k][:_MAX_REPR] + "... [truncated]"
            else:
                del data[k]
    return data


def _figures(shown):
    # Only when the code itself loaded pyplot: importing matplotlib here
    # would slow every run and change the namespace's behaviour. A figure
    # that was the run's value has been sent already.
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in list(plt.get_fignums()):
        fig = plt.figure(num)
        if fig is not shown:
            _send({"type": "result", "data": _bounded(_figure_data(fig)), "main": False})
    plt.close("all")


def _error(e):
    # The driver's own frames tell the user nothing: start at the cell.
    tb = e.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(e), e, tb))
    _send({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": text})


def _run(code, n):
    name = "<cell %d>" % n
    # Registered so tracebacks can quote the cell's lines.
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(code, name, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, name, "exec"), _ns)
    if last is not None:
        value = eval(compile(last, name, "eval"), _ns)
        if value is not None:
            _ns["_"] = value
            _send({"type": "result", "data": _bundle(value), "main": True})
            return value
    return None


def _set_env(env):
    # A run's own variables: set now, given their earlier values back
    # after the run, so the context's environment stays its own.
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    return saved


def _restore_env(saved):
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _main():
    _send({"type": "ready", "version": sys.version.split()[0]})
    while True:
        try:
            line = _readline()
        except KeyboardInterrupt:
            continue
        if line is None:
            return
        try:
            req = json.loads(line)
            status = "ok"
            shown = None
            saved = _set_env(req.get("env") or {})
            try:
                try:
                    shown = _run(req["code"], req.get("n", 0))
                except SystemExit as e:
                    _error(e)
                    status = "error"
                except BaseException as e:
                    _error(e)
                    status = "error"
                try:
                    _figures(shown)
                except Exception:
                    pass
            finally:
                _restore_env(saved)
            sys.stdout.flush()
            sys.stderr.flush()
            _send({"type": "done", "status": status})
        except KeyboardInterrupt:
            _send({"type": "done", "status": "error"})


_main()
