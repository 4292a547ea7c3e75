import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    mo.md(
        """
        # The Stepper in marimo

        marimo renders the Stepper as it renders any anywidget: end a cell with it, or wrap
        it in `mo.ui.anywidget(...)`. There are no magics in marimo: `wf.stepper(input)`
        opens it on a new run and `thena_nb.stepper(run)` on a recorded one. Everything
        here runs offline (scripted models).
        """
    )
    return (mo,)


@app.cell
def _():
    from thena_nb import Agent, Workflow, loop, tool, until_answered
    from thena_nb.models import ScriptedModel, reply

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    pay_tool = tool(pay, name="pay", gate=True)  # every call waits for a decision
    calc = Agent(
        "Calc",
        model=ScriptedModel(
            [
                reply.tool("add", a=1, b=2),
                reply.tool("add", a=3, b=3),
                reply.tool("add", a=6, b=4),
                reply.tool("pay", amount=10),
                "1 + 2 + 3 + 4 = 10, and the bill is paid.",
            ]
        ),
        tools=[add, pay_tool],
    )
    wf = Workflow("sums", [loop(steps=[calc], until=until_answered, max_iterations=6)])
    return (wf,)


@app.cell
def _(mo, wf):
    # Step, Run, the turn slider, the inspector's tabs and the gate cards work here as in
    # JupyterLab; keys: s step, r run, ← → scrub (with the Stepper focused). Ending the cell
    # with `stepper` itself shows it too.
    stepper = wf.stepper("What is 1 + 2 + 3 + 4? Then pay the bill.")
    mo.ui.anywidget(stepper)
    return (stepper,)


if __name__ == "__main__":
    app.run()
