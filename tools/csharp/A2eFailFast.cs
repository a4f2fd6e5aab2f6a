// A failed Debug.Assert or Trace.Assert ends the program, as it does under .NET (SandboxFusion
// runs C# with `dotnet run`, a Debug build): Mono's default listener only logs it, so a
// HumanEval, MultiPL-E or MBXP test that asserts with Debug.Assert would pass whatever the
// answer. Compiled into every C# program and named by main.exe.config.
using System;
using System.Diagnostics;

public sealed class A2eFailFast : DefaultTraceListener
{
    public override void Write(string message) { }

    public override void WriteLine(string message) { }

    public override void Fail(string message, string detail)
    {
        Console.Out.Flush();
        Console.Error.WriteLine("Process terminated. Assertion failed."
            + (string.IsNullOrEmpty(message) ? "" : Environment.NewLine + message)
            + (string.IsNullOrEmpty(detail) ? "" : Environment.NewLine + detail));
        Console.Error.WriteLine(new StackTrace(2, true).ToString());
        Environment.Exit(134);
    }
}
